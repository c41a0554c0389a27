//go:build e2e

package aicrimport

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
)

// The AICR-layout example (examples/aicr-bundle: cert-manager, kube-prometheus-stack, the
// nodewright operator and its customisations, gpu-operator with its readiness gate,
// network-operator, nvsentinel) imported with its recipe into the stack's registry — the local
// charts pushed to wrappers/, the upstream ones mirrored to charts/ — rolls out to Ready with the
// real Argo CD: every release Synced and Healthy at the digest the import pinned, in the
// recipe's dependency order, the gate synced by the operator, and each release installed with
// values.yaml merged with cluster-values.yaml.
func TestAICRBundleImportsAndRollsOut(t *testing.T) {
	s := stacktest.Need(t)
	examples, err := stack.ExamplesDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(examples, stack.AICRBundleDir)
	recipe := filepath.Join(dir, "recipe.yaml")
	imp, err := s.ImportAICR(t.Context(), dir, recipe)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"37 checksums verified", "mirrored", "pushed", "8 steps:", "gpu-operator-readiness     Install (gate)  after gpu-operator"} {
		if !strings.Contains(imp.Report, want) {
			t.Errorf("the import's report does not say %q:\n%s", want, imp.Report)
		}
	}
	// Again, now that everything is in the registry: the same bundle, byte for byte.
	again, err := s.ImportAICR(t.Context(), dir, recipe)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(imp.Document, again.Document) {
		t.Fatalf("a second import of the same folder differs:\n%s\n---\n%s", imp.Document, again.Document)
	}
	if strings.Contains(again.Report, "mirrored") {
		t.Errorf("the second import mirrored charts the registry already held:\n%s", again.Report)
	}

	rt := stacktest.RolledOut(t, s, imp.Document, stack.DefaultRuntimeSpec())
	ro, err := s.Rollout(t.Context(), rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ro.Status.Steps), len(imp.Bundle.Components); got != want {
		t.Fatalf("rollout %s has %d steps, want one per component (%d)", ro.Name, got, want)
	}
	steps := map[string]v1alpha1.Step{}
	for _, st := range ro.Status.Steps {
		if st.State != v1alpha1.StepSucceeded || st.StartedAt == nil || st.FinishedAt == nil {
			t.Fatalf("step %d %s: state %s", st.Index, st.Release, st.State)
		}
		steps[st.Release] = st
	}
	for _, c := range imp.Bundle.Components {
		for _, d := range c.DependsOn {
			if steps[c.Name].StartedAt.Before(steps[d].FinishedAt) {
				t.Errorf("%s started at %s, before its dependency %s finished at %s", c.Name, steps[c.Name].StartedAt, d, steps[d].FinishedAt)
			}
		}
		app := stacktest.Application(t, s, c.Name)
		src := app.Spec.Source
		if src == nil || src.RepoURL != appspec.RepoURL(s.Repository, c.Chart.Path) || src.TargetRevision != c.Chart.Digest {
			t.Errorf("%s: source %+v, want %s at %s", c.Name, src, c.Chart.Path, c.Chart.Digest)
		}
		if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != c.Chart.Digest {
			t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", c.Name, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, c.Chart.Digest)
		}
		if app.Spec.Destination.Namespace != c.Namespace {
			t.Errorf("%s: destination namespace %s, want %s", c.Name, app.Spec.Destination.Namespace, c.Namespace)
		}
	}
	// nvsentinel waits for the gpu-operator's gate, not only for gpu-operator.
	if nv, gate := steps["nvsentinel"], steps["gpu-operator-readiness"]; nv.StartedAt.Before(gate.FinishedAt) {
		t.Errorf("nvsentinel started at %s, before the gpu-operator readiness gate finished at %s", nv.StartedAt, gate.FinishedAt)
	}
	gate := stacktest.Application(t, s, "gpu-operator-readiness")
	if op := gate.Status.OperationState; op == nil || op.Operation.InitiatedBy.Username != v1alpha1.FieldManager || op.Phase != "Succeeded" {
		t.Errorf("the readiness gate's last operation %+v was not a succeeded sync initiated by %s", op, v1alpha1.FieldManager)
	}
	if !steps["gpu-operator-readiness"].ReadinessGate {
		t.Errorf("step gpu-operator-readiness is not a readiness gate")
	}

	// The releases run with values.yaml merged with cluster-values.yaml: the stand-in charts
	// write the values they got into <release>-values; the wrapper renders its own.
	live := func(ns, name, key string) map[string]any {
		t.Helper()
		cm, err := s.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap %s/%s: %v", ns, name, err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(cm.Data[key]), &v); err != nil {
			t.Fatalf("configmap %s/%s %s: %v", ns, name, key, err)
		}
		return v
	}
	gpu := live("gpu-operator", "gpu-operator-values", "values.json")
	if diff := cmp.Diff(map[string]any{"cpu": "500m", "memory": "1Gi"}, dig(gpu, "operator", "resources", "limits")); diff != "" {
		t.Errorf("gpu-operator operator.resources.limits: the mappings merged key by key (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{map[string]any{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}}, dig(gpu, "devicePlugin", "env")); diff != "" {
		t.Errorf("gpu-operator devicePlugin.env: cluster-values.yaml's list replaces values.yaml's (-want +got):\n%s", diff)
	}
	if got := dig(gpu, "driver", "version"); got != "595.91.07" {
		t.Errorf("gpu-operator driver.version %v, want values.yaml's 595.91.07", got)
	}
	nv := live("nvsentinel", "nvsentinel-values", "values.json")
	if diff := cmp.Diff([]any{"SysLogsXIDError", "SysLogsGPUFallenOff"}, dig(nv, "syslog-health-monitor", "enabledChecks")); diff != "" {
		t.Errorf("nvsentinel enabledChecks (-want +got):\n%s", diff)
	}
	cm, err := s.Kube.CoreV1().ConfigMaps("skyhook").Get(t.Context(), "tuning", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the wrapper chart nodewright-customizations did not render its ConfigMap: %v", err)
	}
	if got, want := cm.Data["nodeSelector"], `{"nvidia.com/gpu.present":"true"}`; got != want {
		t.Errorf("nodewright-customizations nodeSelector %s, want cluster-values.yaml's %s", got, want)
	}
}

// dig walks nested mappings.
func dig(v map[string]any, keys ...string) any {
	var cur any = v
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}
