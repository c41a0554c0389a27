//go:build e2e

package credentials

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

var pushedDigest = regexp.MustCompile(`(?m)^digest: (sha256:[0-9a-f]{64})$`)

// The runtime's bundle moves from its ConfigMap into the registry (spec.bundle.oci), pushed with
// kubectl aicr bundle push and the token credrefresher wrote: the planner pulls it with the
// repo-creds Secret and the stack stays at its plan. The registry's password is rotated, the
// refresher writes the new token, and a second bundle (a new kubeflow-trainer chart) is pushed:
// changing the runtime's digest to it rolls the stack out to a new plan, so the planner pulled
// with the refreshed token. A digest the registry does not have is Resolved=False
// BundleNotFound naming the field; no token reaches a log, the status or an Event.
func TestOCIBundleMovesTheStackWithRefreshedTokens(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	ecr := s.ECR()
	if ecr == nil {
		t.Fatal("the stack runs without Options.AWSAuth: no fake ECR endpoint")
	}
	before, err := s.Runtime(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err != nil || before.Status.ActivePlan == "" { // run alone: roll the example out first
		bundle, err := s.ExampleBundle("1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		before = stacktest.RolledOut(t, s, bundle, stack.DefaultRuntimeSpec())
	}
	repository := s.Repository + "/bundles/gpu-stack"
	push := func(file, tag string) string {
		t.Helper()
		sec, err := repoCreds(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.KubectlAICRInput(ctx, string(sec.Data["password"]), "bundle", "push", file,
			"--repository", repository+":"+tag, "--plain-http", "--username", stack.ECRUsername, "--password-stdin")
		if err != nil {
			t.Fatal(err)
		}
		m := pushedDigest.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "repository: "+repository) {
			t.Fatalf("bundle push printed no digest and spec.bundle.oci:\n%s", out)
		}
		return m[1]
	}
	ociSpec := func(digest string) v1alpha1.ClusterRuntimeSpec {
		return v1alpha1.ClusterRuntimeSpec{Bundle: v1alpha1.BundleSource{OCI: &v1alpha1.OCIBundleSource{Repository: repository, Digest: digest}}}
	}

	// The bundle the ConfigMap holds, now from the registry: the same plan, nothing to roll out.
	cm, err := s.Kube.CoreV1().ConfigMaps(stack.OperatorNamespace).Get(ctx, stack.BundleConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current := writeFile(t, "current.yaml", cm.Data[v1alpha1.DefaultBundleKey])
	d1 := push(current, "current")
	if err := s.ApplyRuntime(ctx, ociSpec(d1)); err != nil {
		t.Fatal(err)
	}
	rt, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Status.DesiredPlan != before.Status.ActivePlan || rt.Status.ActivePlan != before.Status.ActivePlan {
		t.Fatalf("from the registry: desired %s, active %s; want the ConfigMap's plan %s", rt.Status.DesiredPlan, rt.Status.ActivePlan, before.Status.ActivePlan)
	}

	// The password rotates; the refresher writes the new token into the Secret.
	rotated := stack.RandomPassword()
	plant(rotated)
	if err := s.RotateRegistryPassword(ctx, rotated); err != nil {
		t.Fatal(err)
	}
	ecr.SetPassword(rotated)
	waitSecretPassword(t, s, rotated)

	// A new bundle: kubeflow-trainer at a new chart digest, pushed with the new token.
	const release = "kubeflow-trainer"
	chart := pushNewVersion(t, s, release, "1.0.2-oci")
	digests := maps.Clone(s.Digests)
	digests[release] = chart
	next, err := stack.BundleYAML("gpu-stack", "2.0.0", stack.ExampleComponents(), digests)
	if err != nil {
		t.Fatal(err)
	}
	d2 := push(writeFile(t, "next.yaml", string(next)), "2.0.0")
	if err := s.ApplyRuntime(ctx, ociSpec(d2)); err != nil {
		t.Fatal(err)
	}
	rt = waitNewPlanRolledOut(t, s, before.Status.ActivePlan)
	ro, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Spec.FromDigest != before.Status.ActivePlan || ro.Spec.ToDigest != rt.Status.ActivePlan {
		t.Errorf("rollout %s from %s to %s; want from %s to %s", ro.Name, ro.Spec.FromDigest, ro.Spec.ToDigest, before.Status.ActivePlan, rt.Status.ActivePlan)
	}
	upgraded := false
	for _, st := range ro.Status.Steps {
		upgraded = upgraded || (st.Release == release && st.Action == v1alpha1.ActionUpgrade && st.State == v1alpha1.StepSucceeded)
	}
	if !upgraded {
		t.Errorf("rollout %s has no succeeded Upgrade of %s: %+v", ro.Name, release, ro.Status.Steps)
	}
	app := stacktest.Application(t, s, release)
	if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != chart {
		t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", release, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, chart)
	}

	// A digest nobody pushed: the registry's answer, naming the field.
	missing := "sha256:" + strings.Repeat("0", 64)
	if err := s.ApplyRuntime(ctx, ociSpec(missing)); err != nil {
		t.Fatal(err)
	}
	rt, err = s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionResolved, metav1.ConditionFalse, v1alpha1.ReasonBundleNotFound)
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionResolved)
	for _, want := range []string{"spec.bundle.oci.digest", missing, "MANIFEST_UNKNOWN", "kubectl aicr bundle push"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Resolved message %q: want %q in it", c.Message, want)
		}
	}
	// Back to the bundle that rolled out: nothing left to do.
	if err := s.ApplyRuntime(ctx, ociSpec(d2)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, s)
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
