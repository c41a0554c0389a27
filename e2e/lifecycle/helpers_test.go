//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts of this package (the rollout ones come from stacktest).
const (
	// heldTimeout bounds waiting for a step held back by the test to show why it waits.
	heldTimeout = 2 * time.Minute
	// goneTimeout bounds waiting for Argo CD to delete an Application and its resources.
	goneTimeout = 3 * time.Minute
)

// applied is what the tests last applied: the tests share one stack and run in order, and each
// starts from the state the one before left (ensure).
var applied struct {
	set    bool
	bundle []byte
	spec   v1alpha1.ClusterRuntimeSpec
}

// fullBundle is the example bundle with every component.
func fullBundle(t *testing.T, s *stack.Stack) []byte {
	t.Helper()
	b, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bundleWithout is the example bundle without the named components.
func bundleWithout(t *testing.T, s *stack.Stack, names ...string) []byte {
	t.Helper()
	var cs []stack.ExampleComponent
	for _, c := range stack.ExampleComponents() {
		if !slices.Contains(names, c.Name) {
			cs = append(cs, c)
		}
	}
	b, err := stack.BundleYAML("gpu-stack", "1.0.0", cs, s.Digests)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// current returns what the previous test left applied, or the full example bundle with the
// default spec when this test runs first.
func current(t *testing.T, s *stack.Stack) ([]byte, v1alpha1.ClusterRuntimeSpec) {
	if applied.set {
		return applied.bundle, *applied.spec.DeepCopy()
	}
	return fullBundle(t, s), stack.DefaultRuntimeSpec()
}

// ensure brings the runtime to bundle and spec, rolled out (Ready=True/RolledOut at the desired
// plan), and returns it.
func ensure(t *testing.T, s *stack.Stack, bundle []byte, spec v1alpha1.ClusterRuntimeSpec) *v1alpha1.ClusterRuntime {
	t.Helper()
	if applied.set && string(applied.bundle) == string(bundle) && reflect.DeepEqual(applied.spec, spec) {
		return waitRolledOut(t, s)
	}
	if _, err := s.Runtime(t.Context()); apierrors.IsNotFound(err) {
		apply(t, s, bundle, spec)
		return waitRolledOut(t, s)
	}
	change(t, s, bundle, spec)
	return waitRolledOut(t, s)
}

// apply writes bundle and spec and remembers them.
func apply(t *testing.T, s *stack.Stack, bundle []byte, spec v1alpha1.ClusterRuntimeSpec) {
	t.Helper()
	if err := s.ApplyBundle(t.Context(), bundle); err != nil {
		t.Fatal(err)
	}
	// The planner writes the runtime's status (and finalizer) meanwhile: read and write again on
	// a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.ApplyRuntime(t.Context(), spec) }); err != nil {
		t.Fatal(err)
	}
	applied.set, applied.bundle, applied.spec = true, bundle, *spec.DeepCopy()
}

// change applies bundle and spec to a rolled-out runtime and returns the rollout that moves it
// from its active plan to the new desired plan.
func change(t *testing.T, s *stack.Stack, bundle []byte, spec v1alpha1.ClusterRuntimeSpec) *v1alpha1.RuntimeRollout {
	t.Helper()
	rt, err := s.Runtime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	from := rt.Status.ActivePlan
	apply(t, s, bundle, spec)
	return stacktest.NewRollout(t, s, from)
}

// waitRolledOut waits for Ready=True/RolledOut, observed at the runtime's generation, at the
// desired plan.
func waitRolledOut(t *testing.T, s *stack.Stack) *v1alpha1.ClusterRuntime {
	t.Helper()
	var rt *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(t.Context(), stacktest.RolloutTimeout, "runtime Ready=True/RolledOut at its desired plan", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		rt = r
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRolledOut || c.ObservedGeneration != r.Generation ||
			r.Status.ActivePlan == "" || r.Status.ActivePlan != r.Status.DesiredPlan {
			return false, fmt.Errorf("%s; progress %q", stack.Blocker(r), r.Status.Progress)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// stepID is the ID of a rollout's step, as in the protocol: "<rollout>/<index>".
func stepID(ro *v1alpha1.RuntimeRollout, st v1alpha1.Step) string {
	return v1alpha1.StepID(ro.Name, st.Index)
}

// stepToken is what the refresh handshake and the gate's sync name the step by: its ID and the
// rollout's UID (v1alpha1.StepToken).
func stepToken(ro *v1alpha1.RuntimeRollout, st v1alpha1.Step) string {
	return v1alpha1.StepToken(stepID(ro, st), string(ro.UID))
}

// fence returns the named fence of a verdict.
func fence(v *v1alpha1.Verdict, name string) (v1alpha1.Fence, bool) {
	if v == nil {
		return v1alpha1.Fence{}, false
	}
	for _, f := range v.Fences {
		if f.Name == name {
			return f, true
		}
	}
	return v1alpha1.Fence{}, false
}

// allPassed fails the test unless every fence of the step's verdict is Passed.
func allPassed(t *testing.T, st v1alpha1.Step) {
	t.Helper()
	if st.Verdict == nil || !st.Verdict.Ready || len(st.Verdict.Fences) == 0 {
		t.Fatalf("step %d %s: verdict %+v, want ready with fences", st.Index, st.Release, st.Verdict)
	}
	for _, f := range st.Verdict.Fences {
		if f.State != v1alpha1.FencePassed {
			t.Errorf("step %d %s: fence %s is %s (%s), want Passed", st.Index, st.Release, f.Name, f.State, f.Message)
		}
	}
}

// waitRolloutDone waits until the rollout succeeded and returns it.
func waitRolloutDone(t *testing.T, s *stack.Stack, name string) *v1alpha1.RuntimeRollout {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(t.Context(), stacktest.RolloutTimeout, "rollout "+name+" succeeded", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, name)
		if err != nil {
			return false, err
		}
		ro = r
		switch p := r.Status.Phase; {
		case p == v1alpha1.PhaseSucceeded:
			return true, nil
		case p.Terminal():
			return false, fmt.Errorf("rollout %s ended %s: %s (steps: %s)", name, p, r.Status.Message, stacktest.DescribeSteps(r))
		}
		return false, fmt.Errorf("phase %s: %s", r.Status.Phase, stacktest.DescribeSteps(r))
	})
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

// withOverride returns spec with the override of component's path set to the JSON value.
func withOverride(spec v1alpha1.ClusterRuntimeSpec, component, path, jsonValue string) v1alpha1.ClusterRuntimeSpec {
	out := *spec.DeepCopy()
	var o v1alpha1.Override
	o.Component, o.Path, o.Value.Raw = component, path, []byte(jsonValue)
	for i := range out.Overrides {
		if out.Overrides[i].Component == component && out.Overrides[i].Path == path {
			out.Overrides[i] = o
			return out
		}
	}
	out.Overrides = append(out.Overrides, o)
	return out
}

// driverVersions are the gpu-operator driver versions the upgrade tests move between.
var driverVersions = []string{"580.95.06", "580.95.07", "580.95.08", "580.95.09"}

var nextDriver int

// upgradeGPUOperator changes the gpu-operator's driver version (an override of a value the
// bundle declares), from whatever the previous test left, and returns the new spec.
func upgradeGPUOperator(t *testing.T, s *stack.Stack) ([]byte, v1alpha1.ClusterRuntimeSpec) {
	t.Helper()
	bundle, spec := current(t, s)
	ensure(t, s, bundle, spec)
	v := driverVersions[nextDriver%len(driverVersions)]
	nextDriver++
	return bundle, withOverride(spec, "gpu-operator", "driver.version", strconv.Quote(v))
}

// ownedApplications lists the Applications the operator owns.
func ownedApplications(ctx context.Context, s *stack.Stack) ([]*argoapp.Application, error) {
	list, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue})
	if err != nil {
		return nil, err
	}
	var out []*argoapp.Application
	for i := range list.Items {
		app, err := stacktest.DecodeApplication(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, app)
	}
	return out, nil
}

// adminUsername is the username the environment's admin kubeconfig authenticates as.
func adminUsername(t *testing.T, s *stack.Stack) string {
	t.Helper()
	r, err := s.Kube.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who am I: %v", err)
	}
	return r.Status.UserInfo.Username
}

// approve approves the rollout's Remove steps as the admin, with kubectl-aicr, and checks that
// the approval is recorded in the admin's name.
func approve(t *testing.T, s *stack.Stack, name, reason string) {
	t.Helper()
	out, err := s.KubectlAICR(t.Context(), "approve", name, "--reason", reason)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl aicr approve: %s", out)
	ro, err := s.Rollout(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	admin := adminUsername(t, s)
	if a := ro.Spec.Approval; a == nil || a.ApprovedBy != admin || a.Reason != reason || a.Revoked != nil {
		t.Fatalf("rollout %s approval %+v, want approvedBy %q with reason %q", name, ro.Spec.Approval, admin, reason)
	}
}

// stepSucceeded matches a Succeeded step.
func stepSucceeded(st v1alpha1.Step) bool { return st.State == v1alpha1.StepSucceeded }

// versionAt returns the recorded version of the named Application stored at resourceVersion rv,
// or nil when none was.
func versionAt(t *testing.T, apps *stacktest.History, name string, rv uint64) *argoapp.Application {
	t.Helper()
	for _, e := range apps.Of(t, name) {
		if e.RV != rv {
			continue
		}
		app, err := stacktest.DecodeApplication(e.Object)
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	return nil
}

// fenceList renders a verdict's fences as "Name=State, ...".
func fenceList(v *v1alpha1.Verdict) string {
	if v == nil {
		return "none"
	}
	out := make([]string, 0, len(v.Fences))
	for _, f := range v.Fences {
		out = append(out, f.Name+"="+string(f.State))
	}
	return strings.Join(out, ", ")
}
