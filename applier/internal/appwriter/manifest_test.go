package appwriter

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func testSettings() appspec.Settings {
	return appspec.Settings{EngineNamespace: testEngineNS, Project: appspec.DefaultProject, Repository: testRepository}
}

// TestManifestGolden pins the exact object the applier applies for the gpu-operator example.
// Regenerate with: go test ./applier/internal/appwriter -run TestManifestGolden -update
func TestManifestGolden(t *testing.T) {
	p, _ := testPlan(t, "hello")
	cmd := applyCmd(p, "gpu-operator", 5)
	rel, _ := p.Release("gpu-operator")
	app, err := appspec.Build(testSettings(), appspec.Input{Runtime: cmd.Runtime, RuntimeUID: cmd.RuntimeUID,
		PlanDigest: cmd.PlanDigest, Release: rel, StepID: cmd.Step.ID, StepStarted: cmd.Step.Started})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	body, err := manifest(app, v1alpha1.StepWriteChanged, "")
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	got, err := yaml.JSONToYAML(body)
	if err != nil {
		t.Fatalf("to yaml: %v", err)
	}
	path := filepath.Join("testdata", "gpu-operator.application.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("applied manifest differs from %s (-want +got):\n%s", path, diff)
	}
}

// TestManifestLeavesOutWhatArgoCDOwns proves the applied object never states status,
// operation, the refresh annotation or the resources finalizer, and keeps a resourceVersion
// precondition when asked.
func TestManifestLeavesOutWhatArgoCDOwns(t *testing.T) {
	p, _ := testPlan(t, "hello")
	rel, _ := p.Release("gpu-readiness")
	app, err := appspec.Build(testSettings(), appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID, PlanDigest: p.Digest(), Release: rel, StepID: "r/1"})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	app.Status.Health.Status = "Healthy" // must not leak into the apply
	body, err := manifest(app, v1alpha1.StepWriteUnchanged, "42")
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var obj struct {
		Metadata  map[string]any `json:"metadata"`
		Status    any            `json:"status"`
		Operation any            `json:"operation"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if obj.Status != nil || obj.Operation != nil {
		t.Errorf("manifest states status %v / operation %v; want neither", obj.Status, obj.Operation)
	}
	if _, ok := obj.Metadata["finalizers"]; ok {
		t.Errorf("manifest states finalizers: %v", obj.Metadata["finalizers"])
	}
	if _, ok := obj.Metadata["creationTimestamp"]; ok {
		t.Errorf("manifest states creationTimestamp")
	}
	annotations, _ := obj.Metadata["annotations"].(map[string]any)
	if _, ok := annotations[v1alpha1.AnnotationArgoRefresh]; ok {
		t.Errorf("manifest carries %s", v1alpha1.AnnotationArgoRefresh)
	}
	if got := annotations[v1alpha1.AnnotationStepWrite]; got != v1alpha1.StepWriteUnchanged {
		t.Errorf("step-write = %v, want %s", got, v1alpha1.StepWriteUnchanged)
	}
	if got := obj.Metadata["resourceVersion"]; got != "42" {
		t.Errorf("resourceVersion = %v, want 42", got)
	}
}
