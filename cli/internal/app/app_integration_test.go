//go:build integration

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// registryAuth is the environment registry's login (bundle push).
var registryAuth = &testenv.BasicAuth{Username: "AWS", Password: "bundle-push-test-token"}

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{Registry: true, RegistryAuth: registryAuth}))
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

func envFor(stdout, stderr *syncBuffer) Env {
	return Env{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Clock: clock.RealClock{}}
}

// kubectl runs the plugin against the test's API server with its admin kubeconfig.
func kubectl(t *testing.T, env *testenv.Env, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	code := Main(ctx, append(args, "--kubeconfig", env.Kubeconfig), envFor(&stdout, &stderr))
	return code, stdout.String(), stderr.String()
}

// kubectlAs runs the plugin as user (kubectl's --as), an administrator.
func kubectlAs(t *testing.T, env *testenv.Env, user string, args ...string) (int, string, string) {
	t.Helper()
	return kubectl(t, env, append(args, "--as", user, "--as-group", "system:authenticated", "--as-group", "system:masters")...)
}

// background runs a long command (a watch, a wait) and returns its output buffers and exit code.
func background(t *testing.T, env *testenv.Env, args ...string) (*syncBuffer, *syncBuffer, <-chan int) {
	t.Helper()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	t.Cleanup(cancel)
	go func() { done <- Main(ctx, append(args, "--kubeconfig", env.Kubeconfig), envFor(stdout, stderr)) }()
	return stdout, stderr, done
}

func waitOutput(t *testing.T, buf *syncBuffer, what string, cond func(string) bool) {
	t.Helper()
	err := testenv.WaitFor(context.Background(), commandTimeout, what, func(context.Context) (bool, error) { return cond(buf.String()), nil })
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, buf.String())
	}
}

func waitExit(t *testing.T, done <-chan int, stdout, stderr *syncBuffer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(commandTimeout):
		t.Fatalf("the command did not end:\n%s\n%s", stdout.String(), stderr.String())
	}
	return -1
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

// setRolloutStatus replaces a rollout's status, as the planner does.
func setRolloutStatus(t *testing.T, dyn dynamic.Interface, name string, edit func(*v1alpha1.RuntimeRolloutStatus)) {
	t.Helper()
	ro := getRollout(t, dyn, name)
	edit(&ro.Status)
	u, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = toUnstructured(t, &v1alpha1.RuntimeRollout{Status: ro.Status}).Object["status"]
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set rollout status: %v", err)
	}
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

func ensureNamespace(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
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
	deleteRuntime(t, env)
	created, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Create(ctx, toUnstructured(t, rt), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create clusterruntime: %v", err)
	}
	t.Cleanup(func() { deleteRuntime(t, env) })
	return created
}

func deleteRuntime(t *testing.T, env *testenv.Env) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	_ = dyn.Resource(v1alpha1.ClusterRuntimeResource).Delete(context.Background(), "cluster", metav1.DeleteOptions{})
	err := testenv.WaitFor(context.Background(), commandTimeout, "the runtime is gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Get(ctx, "cluster", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
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

func apiextJSON(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }

func condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}
}

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
)

// rollingOut is a runtime rolling out r-... toward digestB.
func rollingOut(rollout string) v1alpha1.ClusterRuntimeStatus {
	return v1alpha1.ClusterRuntimeStatus{Rollout: rollout, DesiredPlan: digestB, ActivePlan: digestA,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRollingOut, "step 1/2 gpu-operator (Upgrade)")}}
}

func rolledOut(rollout string) v1alpha1.ClusterRuntimeStatus {
	return v1alpha1.ClusterRuntimeStatus{Rollout: rollout, DesiredPlan: digestB, ActivePlan: digestB,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut, "rolled out")}}
}

// exampleBundle is examples/bundle.yaml.
func exampleBundle(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// storePlan resolves a bundle with the runtime's override and stores it as the planner does.
func storePlan(t *testing.T, env *testenv.Env, bundle []byte, overrides []v1alpha1.Override) *plan.Plan {
	t.Helper()
	b, err := plan.ParseBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := p.ConfigMap(opNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, env, opNamespace)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().ConfigMaps(opNamespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return p
}

func storeBundle(t *testing.T, env *testenv.Env, name string, bundle []byte) {
	t.Helper()
	ensureNamespace(t, env, opNamespace)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opNamespace}, Data: map[string]string{"bundle.yaml": string(bundle)}}
	if _, err := kc.CoreV1().ConfigMaps(opNamespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := kc.CoreV1().ConfigMaps(opNamespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return m
}

// formatCase is one -o format and what its output must contain.
type formatCase struct {
	args []string
	want []string
}

func checkFormats(t *testing.T, env *testenv.Env, base []string, cases map[string]formatCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := kubectl(t, env, append(append([]string{}, base...), tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}
