//go:build integration

package controlplane_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// testTimeout bounds each test's API calls, with room for testenv's own waits (a CRD's
// removal may take up to 3 minutes on a loaded machine).
const testTimeout = 5 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

func application(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": name, "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL":        "oci://127.0.0.1:5000/charts/demo",
				"path":           ".",
				"targetRevision": "0.1.0",
			},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "demo"},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
}

// An Application written to the real apiserver reads back with its spec intact, and a test can
// give it an Argo-CD-shaped status with a plain update (the CRD has no status subresource), which
// is how integration tests drive the operator's watch logic without Argo CD running.
func TestApplicationRoundTrip(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ArgoCDNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	apps := dynamic.NewForConfigOrDie(env.Config).Resource(testenv.ApplicationGVR).Namespace(testenv.ArgoCDNamespace)

	want := application("roundtrip")
	if _, err := apps.Create(ctx, want, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create application: %v", err)
	}
	got, err := apps.Get(ctx, "roundtrip", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get application: %v", err)
	}
	if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
		t.Errorf("spec read back (-want +got):\n%s", diff)
	}
	if _, found := got.Object["status"]; found {
		t.Errorf("status = %v on a fresh Application, want none (no controller runs)", got.Object["status"])
	}

	status := map[string]any{
		"sync":   map[string]any{"status": "Synced", "revision": "sha256:e55291cff5394da5095c79044c4391c13a34812ec347fba647cb8387f6b25be6"},
		"health": map[string]any{"status": "Healthy"},
		"operationState": map[string]any{
			"phase":      "Succeeded",
			"message":    "successfully synced (no more tasks)",
			"startedAt":  "2026-11-30T04:17:20Z",
			"finishedAt": "2026-11-30T04:17:24Z",
			"operation": map[string]any{
				"initiatedBy": map[string]any{"automated": true},
				"sync":        map[string]any{"revision": "sha256:e55291cff5394da5095c79044c4391c13a34812ec347fba647cb8387f6b25be6"},
			},
		},
	}
	got.Object["status"] = status
	if _, err := apps.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update application status: %v", err)
	}
	again, err := apps.Get(ctx, "roundtrip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(status, again.Object["status"]); diff != "" {
		t.Errorf("status read back (-want +got):\n%s", diff)
	}
}

// The operator's own CRDs are installed and served.
func TestOperatorCRDsServed(t *testing.T) {
	env := testenv.Current(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	list, err := dc.ServerResourcesForGroupVersion("operator.aicr.run/v1alpha1")
	if err != nil {
		t.Fatalf("discover operator.aicr.run/v1alpha1: %v", err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	for _, want := range []string{"clusterruntimes", "runtimerollouts"} {
		if !served[want] {
			t.Errorf("%s not served; served: %v", want, served)
		}
	}
}

// Argo CD's CRDs can be left out at start and installed and removed later (as a readiness test
// does to see the operator wait for Argo CD).
func TestArgoCRDsInstallLaterAndUninstall(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{SkipArgoCRDs: true, SkipOperatorCRDs: true})
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	apps := dynamic.NewForConfigOrDie(env.Config).Resource(testenv.ApplicationGVR).Namespace("default")

	if _, err := apps.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("list applications before install = %v, want NotFound", err)
	}
	start := time.Now()
	if err := env.InstallArgoCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("argo cd crds installed in %s", time.Since(start).Round(100*time.Millisecond))
	if _, err := apps.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list applications after install: %v", err)
	}
	start = time.Now()
	if err := env.UninstallArgoCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("argo cd crds removed in %s", time.Since(start).Round(100*time.Millisecond))
	if _, err := apps.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("list applications after uninstall = %v, want NotFound", err)
	}
}

// Stop leaves no process and no directory behind.
func TestStopLeavesNothingBehind(t *testing.T) {
	if os.Getenv(testenv.EnvKeep) == "running" {
		t.Skipf("%s=running leaves processes running on purpose", testenv.EnvKeep)
	}
	env := testenv.StartT(t, testenv.Options{SkipArgoCRDs: true, SkipOperatorCRDs: true})
	procs, err := testenv.ReadPIDs(env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env.Processes(), procs); diff != "" {
		t.Fatalf("pids file vs Processes (-want +got):\n%s", diff)
	}
	if len(procs) != 2 {
		t.Fatalf("processes = %v, want etcd and kube-apiserver", procs)
	}
	for _, p := range procs {
		if err := syscall.Kill(p.PID, 0); err != nil {
			t.Fatalf("%s (pid %d) not running before Stop: %v", p.Name, p.PID, err)
		}
	}

	if err := env.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, p := range procs {
		if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) after Stop: kill(pid, 0) = %v, want ESRCH", p.Name, p.PID, err)
		}
	}
	if os.Getenv(testenv.EnvKeep) != "" {
		t.Logf("%s is set: dir %s kept on purpose", testenv.EnvKeep, env.Dir)
		return
	}
	if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
		t.Errorf("environment dir %s after Stop: stat = %v, want not exist", env.Dir, err)
	}
}
