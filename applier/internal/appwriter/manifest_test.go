package appwriter

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
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
	body, err := manifest(app, v1alpha1.StepWriteChanged, guard{})
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
	body, err := manifest(app, v1alpha1.StepWriteUnchanged, guard{uid: "uid-1", resourceVersion: "42"})
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
	if got := obj.Metadata["uid"]; got != "uid-1" {
		t.Errorf("uid = %v, want uid-1", got)
	}
}

// manifestCases are typical bodies of the applier's three server-side applies.
func manifestCases(t *testing.T) map[string]func() ([]byte, error) {
	t.Helper()
	p, _ := testPlan(t, `a "quoted" <b>&amp; message`)
	build := func(release string, suspend bool) *argoapp.Application {
		rel, ok := p.Release(release)
		if !ok {
			t.Fatalf("no release %s", release)
		}
		app, err := appspec.Build(testSettings(), appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID,
			PlanDigest: p.Digest(), Release: rel, StepID: testRollout + "/5", StepStarted: testStarted, SuspendEngine: suspend})
		if err != nil {
			t.Fatalf("build %s: %v", release, err)
		}
		app.Status.Health.Status = "Healthy" // as if read back: must not be applied
		return app
	}
	return map[string]func() ([]byte, error){
		"apply-changed": func() ([]byte, error) {
			return manifest(build("gpu-operator", false), v1alpha1.StepWriteChanged, guard{})
		},
		"apply-unchanged-guarded": func() ([]byte, error) {
			return manifest(build("gpu-readiness", false), v1alpha1.StepWriteUnchanged, guard{uid: "uid-1", resourceVersion: "42"})
		},
		"apply-suspended": func() ([]byte, error) {
			return manifest(build("cert-manager", true), v1alpha1.StepWriteChanged, guard{uid: "uid-1", resourceVersion: "7"})
		},
		"apply-without-step-write": func() ([]byte, error) {
			return manifest(build("nfd", false), "", guard{})
		},
		"remove-guarded": func() ([]byte, error) {
			return removeManifest("gpu-operator", testEngineNS, testRollout, guard{uid: "uid-1", resourceVersion: "9"})
		},
		"remove": func() ([]byte, error) {
			return removeManifest("gpu-operator", testEngineNS, testRollout, guard{})
		},
		"release": func() ([]byte, error) {
			return releaseManifest("gpu-operator", testEngineNS, guard{uid: "uid-1"})
		},
	}
}

// TestManifestsAsWritten pins the body of each server-side apply in
// testdata/manifests/<case>.json. The files were written by the builder that rendered the
// Application to a map and edited it; the typed builder must state exactly the same fields with
// the same values (compared as JSON, numbers as written), so that server-side apply gives the
// operator's field managers the same fields as before. Regenerate with -update only for a
// change of what the operator owns.
func TestManifestsAsWritten(t *testing.T) {
	for name, body := range manifestCases(t) {
		t.Run(name, func(t *testing.T) {
			got, err := body()
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			path := filepath.Join("testdata", "manifests", name+".json")
			if *update {
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, got, "", "  "); err != nil {
					t.Fatal(err)
				}
				pretty.WriteByte('\n')
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(decodeJSON(t, want), decodeJSON(t, got)); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s\nbody: %s", path, diff, got)
			}
		})
	}
}

// decodeJSON decodes one JSON document keeping numbers as written.
func decodeJSON(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after the document: %s", data)
	}
	return v
}

// TestManifestStatesWhatBuildRenders: the typed apply body carries every field appspec.Build
// renders, for every release (a field Build starts to set that the body cannot state fails
// here), adds only the step-write annotation and the resourceVersion, and leaves the built
// Application as it was.
func TestManifestStatesWhatBuildRenders(t *testing.T) {
	p, _ := testPlan(t, "hello")
	for _, rel := range p.Releases {
		for _, suspend := range []bool{false, true} {
			app, err := appspec.Build(testSettings(), appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID,
				PlanDigest: p.Digest(), Release: &rel, StepID: "r/1", StepStarted: testStarted, SuspendEngine: suspend})
			if err != nil {
				t.Fatalf("build %s: %v", rel.Name, err)
			}
			built := app.DeepCopy()
			body, err := manifest(app, v1alpha1.StepWriteChanged, guard{uid: "uid-1", resourceVersion: "42"})
			if err != nil {
				t.Fatalf("manifest %s: %v", rel.Name, err)
			}
			if diff := cmp.Diff(built, app); diff != "" {
				t.Errorf("%s: manifest changed the built Application (-before +after):\n%s", rel.Name, diff)
			}
			var back argoapp.Application
			if err := json.Unmarshal(body, &back); err != nil {
				t.Fatalf("decode %s: %v", rel.Name, err)
			}
			want := built.DeepCopy()
			want.Annotations[v1alpha1.AnnotationStepWrite] = v1alpha1.StepWriteChanged
			want.UID, want.ResourceVersion = "uid-1", "42"
			if diff := cmp.Diff(want, &back); diff != "" {
				t.Errorf("%s (suspend %v): applied object differs from the built one (-built +applied):\n%s", rel.Name, suspend, diff)
			}
		}
	}
}

func TestRemovals(t *testing.T) {
	tests := map[string]struct {
		want, got any
		patch     any
	}{
		"nothing added":           {want: map[string]any{"a": 1.0}, got: map[string]any{"a": 2.0}, patch: nil},
		"an added key":            {want: map[string]any{"a": 1.0}, got: map[string]any{"a": 1.0, "b": 2.0}, patch: map[string]any{"b": nil}},
		"an added key, deep":      {want: map[string]any{"s": map[string]any{"a": 1.0}}, got: map[string]any{"s": map[string]any{"a": 1.0, "chart": "x"}}, patch: map[string]any{"s": map[string]any{"chart": nil}}},
		"a list is atomic":        {want: map[string]any{"l": []any{1.0}}, got: map[string]any{"l": []any{1.0, 2.0}}, patch: nil},
		"a map where want is not": {want: map[string]any{"v": "x"}, got: map[string]any{"v": map[string]any{"k": 1.0}}, patch: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.patch, removals(tc.want, tc.got)); diff != "" {
				t.Errorf("removals (-want +got):\n%s", diff)
			}
		})
	}
}
