//go:build integration

package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

const (
	opNamespace    = "aicr-system"
	commandTimeout = time.Minute
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// kubectl runs the plugin as user against the test's API server.
func kubectl(t *testing.T, env *testenv.Env, user string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	code := Main(context.Background(), args, cluster(env, user, &stdout, &stderr))
	return code, stdout.String(), stderr.String()
}

func cluster(env *testenv.Env, user string, stdout, stderr *syncBuffer) Env {
	return Env{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Clock: clock.RealClock{},
		Config: func(string, string) (*rest.Config, error) {
			if user == "" {
				return rest.CopyConfig(env.Config), nil
			}
			return env.ConfigFor(user, "system:authenticated", "system:masters"), nil
		},
	}
}

func toUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// createRollout creates a rollout and sets its status, as the planner does.
func createRollout(t *testing.T, dyn dynamic.Interface, ro *v1alpha1.RuntimeRollout) {
	t.Helper()
	ctx := context.Background()
	ro.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "RuntimeRollout"}
	status := ro.Status
	created, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Create(ctx, toUnstructured(t, ro), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create rollout: %v", err)
	}
	u := toUnstructured(t, &v1alpha1.RuntimeRollout{Status: status})
	created.Object["status"] = u.Object["status"]
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set rollout status: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.RuntimeRolloutResource).Delete(context.Background(), ro.Name, metav1.DeleteOptions{})
	})
}

func getRollout(t *testing.T, dyn dynamic.Interface, name string) *v1alpha1.RuntimeRollout {
	t.Helper()
	u, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ro v1alpha1.RuntimeRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		t.Fatal(err)
	}
	return &ro
}

func removeRollout(name string, now time.Time) *v1alpha1.RuntimeRollout {
	started := metav1.NewTime(now.Add(-2 * time.Minute))
	deadline := metav1.NewTime(now.Add(6 * time.Hour))
	return &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "uid-1", FromDigest: "sha256:" + strings.Repeat("a", 64),
			ToDigest: "sha256:" + strings.Repeat("b", 64), Reason: v1alpha1.RolloutReasonPlanChanged, Deadline: &deadline},
		Status: v1alpha1.RuntimeRolloutStatus{
			Phase: v1alpha1.PhaseAwaitingApproval,
			Steps: []v1alpha1.Step{
				{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepInProgress, StartedAt: &started,
					Verdict: &v1alpha1.Verdict{Ready: false, ObservedAt: &started, Fences: []v1alpha1.Fence{
						{Name: v1alpha1.FenceComparedToSpec, State: v1alpha1.FencePassed},
						{Name: v1alpha1.FenceSyncedAfterStep, State: v1alpha1.FenceOpen, Message: "operation still Running"},
						{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Progressing"},
					}}},
				{Index: 2, Release: "dcgm-exporter", Action: v1alpha1.ActionRemove, State: v1alpha1.StepAwaitingApproval},
			},
		},
	}
}

// approve sets the approval as the person running the command; revoke withdraws it, as another.
func TestApproveAndRevoke(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-approve", time.Now()))

	before := time.Now().Add(-time.Second)
	code, stdout, stderr := kubectl(t, env, "alice", "approve", "r-approve", "--reason", "the exporter moved into gpu-operator", "--expires", "1h")
	if code != 0 {
		t.Fatalf("approve: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "approved by alice") {
		t.Errorf("approve output %q", stdout)
	}
	a := getRollout(t, dyn, "r-approve").Spec.Approval
	switch {
	case a == nil:
		t.Fatal("no approval written")
	case a.ApprovedBy != "alice" || a.Reason != "the exporter moved into gpu-operator":
		t.Errorf("approval %+v, want alice's with the reason", a)
	case a.ApprovedAt == nil || a.ApprovedAt.Time.Before(before.Truncate(time.Second)):
		t.Errorf("approvedAt %v, want about now", a.ApprovedAt)
	case a.ExpiresAt == nil || a.ExpiresAt.Sub(a.ApprovedAt.Time) != time.Hour:
		t.Errorf("expiresAt %v, want approvedAt + 1h", a.ExpiresAt)
	}

	if code, _, stderr := kubectl(t, env, "bob", "approve", "r-approve", "--reason", "again"); code != 1 || !strings.Contains(stderr, "already approved by alice") {
		t.Errorf("second approve: exit %d, %q; want exit 1, already approved by alice", code, stderr)
	}
	if code, _, stderr := kubectl(t, env, "bob", "revoke", "r-approve"); code != 1 || !strings.Contains(stderr, "--reason is required") {
		t.Errorf("revoke without reason: exit %d, %q", code, stderr)
	}
	if code, _, stderr := kubectl(t, env, "bob", "revoke", "r-approve", "--reason", "wrong cluster"); code != 0 {
		t.Fatalf("revoke: exit %d: %s", code, stderr)
	}
	r := getRollout(t, dyn, "r-approve").Spec.Approval
	if r.Revoked == nil || r.Revoked.RevokedBy != "bob" || r.Revoked.Reason != "wrong cluster" || r.ApprovedBy != "alice" {
		t.Errorf("after revoke: %+v (revoked %+v)", r, r.Revoked)
	}
	if code, _, stderr := kubectl(t, env, "", "approve", "r-missing", "--reason", "x"); code != 1 || !strings.Contains(stderr, "runtimerollout r-missing: not found") {
		t.Errorf("approve of a missing rollout: exit %d, %q", code, stderr)
	}
}

// describe shows the steps, each fence, the approval and what to do.
func TestDescribe(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-describe", time.Now()))
	code, stdout, stderr := kubectl(t, env, "", "describe", "r-describe")
	if code != 0 {
		t.Fatalf("describe: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Name:", "r-describe", "Phase:", "AwaitingApproval", "Progress:", "step 1/2 gpu-operator (Upgrade)",
		"none: 1 Remove step(s) need one (kubectl aicr approve r-describe --reason TEXT)",
		"gpu-operator", "dcgm-exporter", "Remove",
		"[x] ComparedToSpec", "[ ] SyncedAfterStep", "operation still Running", "[ ] Healthy",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("describe output lacks %q:\n%s", want, stdout)
		}
	}
}

func ensureRuntime(t *testing.T, env *testenv.Env, bundleCM string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	rt := &v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: v1alpha1.ClusterRuntimeSpec{
			Bundle:    v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: bundleCM, Key: "bundle.yaml"}},
			Overrides: []v1alpha1.Override{{Component: "gpu-operator", Path: "driver.version", Value: apiextJSON(`"580.105.08"`)}},
		},
	}
	_ = dyn.Resource(v1alpha1.ClusterRuntimeResource).Delete(ctx, "cluster", metav1.DeleteOptions{})
	created, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Create(ctx, toUnstructured(t, rt), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create clusterruntime: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.ClusterRuntimeResource).Delete(context.Background(), "cluster", metav1.DeleteOptions{})
	})
	return created
}

func setRuntimeStatus(t *testing.T, env *testenv.Env, st v1alpha1.ClusterRuntimeStatus) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	u, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = toUnstructured(t, &v1alpha1.ClusterRuntime{Status: st}).Object["status"]
	if _, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set runtime status: %v", err)
	}
}

// status --watch follows the rollout, showing the step and what blocks it, until Ready.
func TestStatusWatchUntilReady(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	now := time.Now()
	createRollout(t, dyn, removeRollout("r-status", now))
	ensureRuntime(t, env, "gpu-stack")
	rolling := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRollingOut,
		Message: "step 1/2 gpu-operator (Upgrade)", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{Rollout: "r-status", Conditions: []metav1.Condition{rolling},
		DesiredPlan: "sha256:" + strings.Repeat("b", 64), ActivePlan: "sha256:" + strings.Repeat("a", 64)})

	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	go func() {
		done <- Main(ctx, []string{"status", "--watch", "--interval", "100ms"}, cluster(env, "", &stdout, &stderr))
	}()
	err := testenv.WaitFor(ctx, commandTimeout, "status shows the blocking step", func(context.Context) (bool, error) {
		return strings.Contains(stdout.String(), "waiting for SyncedAfterStep: operation still Running"), nil
	})
	if err != nil {
		t.Fatalf("%v\noutput:\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"Ready=False RollingOut", "rollout r-status: AwaitingApproval, step 1/2 gpu-operator (Upgrade)",
		"step 1/2 gpu-operator (Upgrade) in progress since 2m", "step 2/2 dcgm-exporter (Remove) awaits approval: kubectl aicr approve r-status"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, stdout.String())
		}
	}
	select {
	case code := <-done:
		t.Fatalf("status --watch returned %d before the runtime was Ready", code)
	default:
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolledOut,
		Message: "rolled out", LastTransitionTime: metav1.Now()}
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{Rollout: "r-status", Conditions: []metav1.Condition{ready},
		DesiredPlan: "sha256:" + strings.Repeat("b", 64), ActivePlan: "sha256:" + strings.Repeat("b", 64)})
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("status --watch exit %d: %s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("status --watch did not end when the runtime became Ready:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "Ready=True RolledOut") {
		t.Errorf("the last frame does not show Ready:\n%s", stdout.String())
	}
}

// reproduce writes the plan and the inputs it came from; they re-derive the digest, and say so
// when the bundle changed since.
func TestReproduce(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gpu-stack-reproduce", Namespace: opNamespace}, Data: map[string]string{"bundle.yaml": string(bundle)}}
	if _, err := kc.CoreV1().ConfigMaps(opNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rtObj := ensureRuntime(t, env, cm.Name)
	var rt v1alpha1.ClusterRuntime
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rtObj.Object, &rt); err != nil {
		t.Fatal(err)
	}
	b, err := plan.ParseBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{Overrides: rt.Spec.Overrides})
	if err != nil {
		t.Fatal(err)
	}
	planCM, err := p.ConfigMap(opNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().ConfigMaps(opNamespace).Create(ctx, planCM, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{ActivePlan: p.Digest()})

	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := kubectl(t, env, "", "reproduce", "--dir", dir)
	if code != 0 {
		t.Fatalf("reproduce: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "re-derive "+p.Digest()) {
		t.Errorf("reproduce output %q does not confirm the digest", stdout)
	}
	planJSON, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(planJSON); "sha256:"+hex.EncodeToString(sum[:]) != p.Digest() {
		t.Errorf("sha256 of plan.json is not the digest %s", p.Digest())
	}
	// Anyone re-derives it from the files alone, without a cluster.
	var pout, perr bytes.Buffer
	if code := Main(ctx, []string{"plan", "--bundle", filepath.Join(dir, "bundle.yaml"), "--runtime", filepath.Join(dir, "clusterruntime.yaml")}, noCluster(t, &pout, &perr)); code != 0 {
		t.Fatalf("plan from the reproduced files: exit %d: %s", code, perr.String())
	}
	if !strings.HasPrefix(pout.String(), "plan "+p.Digest()) {
		t.Errorf("plan from the reproduced files: %q, want digest %s", pout.String(), p.Digest())
	}

	// The bundle changed after the plan was made: the command says so and fails.
	cm.Data["bundle.yaml"] = strings.Replace(string(bundle), "retention: 15d", "retention: 30d", 1)
	if _, err := kc.CoreV1().ConfigMaps(opNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = kubectl(t, env, "", "reproduce", p.Digest(), "--dir", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "changed after the plan was made") {
		t.Errorf("reproduce after a bundle change: exit %d, %q", code, stderr)
	}
}

func apiextJSON(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }
