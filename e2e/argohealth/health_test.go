//go:build e2e

package argohealth

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts: Argo CD syncs two objects and judges their health within seconds on an idle
// machine; the rest is headroom for a loaded one.
const (
	healthTimeout = 3 * time.Minute
	testTimeout   = 10 * time.Minute
	appName       = "gpu-runtime"
	runtimeName   = "cluster"
	rolloutName   = "r-health"
)

var (
	runtimesGVR = v1alpha1.ClusterRuntimeResource
	rolloutsGVR = v1alpha1.RuntimeRolloutResource
)

// healthFile is the argocd-cm fragment users add, the one docs/argocd.md shows.
func healthFile(t *testing.T) (string, map[string]string) {
	t.Helper()
	path := filepath.Join(charttest.RepoRoot(t), "deploy", "argocd", "argocd-cm-health.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]string
	if err := yaml.Unmarshal(raw, &data); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(raw), data
}

// The health checks as docs/argocd.md shows them are the file's, byte for byte.
func TestDocsShowTheHealthChecksFile(t *testing.T) {
	raw, data := healthFile(t)
	docs, err := os.ReadFile(filepath.Join(charttest.RepoRoot(t), "docs", "argocd.md"))
	if err != nil {
		t.Fatal(err)
	}
	for key, lua := range data {
		var b strings.Builder
		b.WriteString("    " + key + ": |\n")
		for _, l := range strings.SplitAfter(lua, "\n") {
			if l == "" {
				continue
			}
			if l == "\n" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("      " + l)
		}
		if !strings.Contains(string(docs), b.String()) {
			t.Errorf("docs/argocd.md does not show %s as deploy/argocd/argocd-cm-health.yaml has it (indented under data:):\n%s", key, b.String())
		}
	}
	if len(data) != 2 {
		t.Errorf("the file has %d keys, want the ClusterRuntime's and the RuntimeRollout's:\n%s", len(data), raw)
	}
}

// TestApplicationHealthFollowsTheRollout adds the health checks to argocd-cm, has Argo CD sync a
// ClusterRuntime and a RuntimeRollout from a chart, then writes their status as the planner does
// through a rollout: Argo CD's Application reports Progressing while it runs, Degraded once it
// failed (the runtime Stalled=True/RolloutFailed, the rollout Failed) and Healthy once a rollout
// succeeded and the runtime is Ready. Without the checks Argo CD knows no health for either kind
// and the Application stays Healthy through the failure.
func TestApplicationHealthFollowsTheRollout(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)

	_, data := healthFile(t)
	cm, err := kc.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Get(ctx, "argocd-cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range data {
		cm.Data[k] = v
	}
	if _, err := kc.CoreV1().ConfigMaps(testenv.ArgoCDNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	chart := t.TempDir()
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: gpu-runtime\nversion: 0.1.0\n",
		"templates/runtime.yaml": `apiVersion: operator.aicr.run/v1alpha1
kind: ClusterRuntime
metadata:
  name: ` + runtimeName + `
spec:
  bundle:
    configMap:
      name: gpu-stack
      key: bundle.yaml
---
apiVersion: operator.aicr.run/v1alpha1
kind: RuntimeRollout
metadata:
  name: ` + rolloutName + `
spec:
  runtime: ` + runtimeName + `
  runtimeUID: "0"
`,
	}
	for name, body := range files {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pushed, err := env.PushChart(ctx, chart, "health")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.CreateOCIRepoSecret(ctx, "gpu-runtime-chart", pushed.Repo); err != nil {
		t.Fatal(err)
	}
	apps := dyn.Resource(testenv.ApplicationGVR).Namespace(testenv.ArgoCDNamespace)
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": appName, "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": pushed.Repo, "path": ".", "targetRevision": pushed.Digest},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "default"},
			"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
		},
	}}
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Application: %v", err)
	}

	// waitHealth waits for the Application's health, and returns its resources' health lines.
	waitHealth := func(want string) {
		t.Helper()
		var last string
		err := testenv.WaitFor(ctx, healthTimeout, "the Application "+want, func(ctx context.Context) (bool, error) {
			got, err := apps.Get(ctx, appName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			health, _, _ := unstructured.NestedString(got.Object, "status", "health", "status")
			sync, _, _ := unstructured.NestedString(got.Object, "status", "sync", "status")
			res, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
			raw, _ := json.Marshal(res)
			last = fmt.Sprintf("sync %s, health %s, resources %s", sync, health, raw)
			return sync == "Synced" && health == want, nil
		})
		if err != nil {
			t.Fatalf("%v; last: %s\napplication-controller log: %s", err, last, env.LogPath(testenv.ProcAppController))
		}
		t.Logf("Application %s: %s", want, last)
	}
	// setStatus writes the two objects' status, as the planner does.
	setStatus := func(ready, readyReason, stalled, stalledReason string, phase v1alpha1.RolloutPhase) {
		t.Helper()
		now := metav1.Now().UTC().Format(time.RFC3339)
		rt, err := dyn.Resource(runtimesGVR).Get(ctx, runtimeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := func(typ, status, reason string) map[string]any {
			return map[string]any{"type": typ, "status": status, "reason": reason, "message": typ + " is " + status + ": " + reason,
				"lastTransitionTime": now, "observedGeneration": rt.GetGeneration()}
		}
		rt.Object["status"] = map[string]any{
			"observedGeneration": rt.GetGeneration(),
			"rollout":            rolloutName,
			"conditions":         []any{cond(v1alpha1.ConditionReady, ready, readyReason), cond(v1alpha1.ConditionStalled, stalled, stalledReason)},
		}
		if _, err := dyn.Resource(runtimesGVR).UpdateStatus(ctx, rt, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("write the runtime's status: %v", err)
		}
		ro, err := dyn.Resource(rolloutsGVR).Get(ctx, rolloutName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ro.Object["status"] = map[string]any{"phase": string(phase), "message": "written by the test"}
		if _, err := dyn.Resource(rolloutsGVR).UpdateStatus(ctx, ro, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("write the rollout's status: %v", err)
		}
	}

	// Synced, the planner not yet heard from: Progressing.
	waitHealth("Progressing")
	setStatus("False", v1alpha1.ReasonRollingOut, "False", v1alpha1.ReasonNotStalled, v1alpha1.PhaseProgressing)
	waitHealth("Progressing")
	setStatus("False", v1alpha1.ReasonRollingOut, "True", v1alpha1.ReasonRolloutFailed, v1alpha1.PhaseFailed)
	waitHealth("Degraded")
	setStatus("True", v1alpha1.ReasonRolledOut, "False", v1alpha1.ReasonNotStalled, v1alpha1.PhaseSucceeded)
	waitHealth("Healthy")
}
