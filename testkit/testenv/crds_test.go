package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDecodeYAMLSkipsEmptyDocuments(t *testing.T) {
	objs, err := decodeYAML([]byte("---\n# only a comment\n---\nkind: A\nmetadata:\n  name: a\n---\n\n---\n{\"kind\": \"B\", \"metadata\": {\"name\": \"b\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "A" || objs[1].GetName() != "b" {
		t.Errorf("decoded %d objects: %v", len(objs), objs)
	}
}

func TestOperatorCRDsAreEmbedded(t *testing.T) {
	docs, err := operatorCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		objs, err := decodeYAML(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				t.Errorf("%s %s in shared/api/crds", o.GetKind(), o.GetName())
			}
			names = append(names, o.GetName())
		}
	}
	if len(names) != 2 {
		t.Errorf("operator CRDs = %v, want clusterruntimes and runtimerollouts", names)
	}
}

// Without the argocd tool's copy, Argo CD's CRDs come from the argo-cd module (every module of
// this repository requires it, so it is in the module cache or served by the Go module proxy): the
// folder found holds each of them, and each is the CRD of its kind in argoproj.io.
func TestArgoCRDsAreFoundWithoutTheArgoCDBinary(t *testing.T) {
	dir, err := argoCRDDir(t.TempDir()) // an empty tools folder: falls back to the module cache
	if err != nil {
		t.Fatalf("argo cd crds without the argocd tool: %v", err)
	}
	wantNames := map[string]string{
		"application-crd.yaml": "applications.argoproj.io",
		"appproject-crd.yaml":  "appprojects.argoproj.io",
		applicationSetCRDFile:  "applicationsets.argoproj.io",
	}
	if len(argoCRDFiles) != len(wantNames) {
		t.Fatalf("argoCRDFiles = %v, want the files of %v", argoCRDFiles, wantNames)
	}
	for _, f := range argoCRDFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s in %s: %v", f, dir, err)
		}
		objs, err := decodeYAML(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(objs) != 1 || objs[0].GetKind() != "CustomResourceDefinition" || objs[0].GetName() != wantNames[f] {
			t.Errorf("%s holds %d objects (first: %s), want the CustomResourceDefinition %s", f, len(objs), kindName(objs), wantNames[f])
		}
	}
}

func kindName(objs []*unstructured.Unstructured) string {
	if len(objs) == 0 {
		return "none"
	}
	return objs[0].GetKind() + " " + objs[0].GetName()
}

// The argocd tool's copy of the CRDs (its bin folder's crds/), when whole, is the one used.
func TestArgoCRDsOfTheArgoCDToolComeFirst(t *testing.T) {
	tools := t.TempDir()
	crds := filepath.Join(tools, "crds")
	if err := os.MkdirAll(crds, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, f := range argoCRDFiles {
		if i == len(argoCRDFiles)-1 {
			// one file missing: not the tool's copy
			if dir, err := argoCRDDir(tools); err != nil || dir == crds {
				t.Fatalf("argoCRDDir with %s missing = %q, %v; want the module's copy", f, dir, err)
			}
		}
		if err := os.WriteFile(filepath.Join(crds, f), []byte("kind: CustomResourceDefinition\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if dir, err := argoCRDDir(tools); err != nil || dir != crds {
		t.Errorf("argoCRDDir = %q, %v; want the tool's %s", dir, err, crds)
	}
}

func TestHasCondition(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "NamesAccepted", "status": "True"},
		map[string]any{"type": "Established", "status": "False"},
	}}}}
	if hasCondition(crd, "Established", "True") {
		t.Error("Established=False reported as True")
	}
	if !hasCondition(crd, "NamesAccepted", "True") {
		t.Error("NamesAccepted=True not found")
	}
}

func TestLinesWithKeepsTheNewestMatches(t *testing.T) {
	log := "a crd_finalizer 1\nunrelated\nb apps.argoproj.io\nc crd_finalizer 2\nd crd_finalizer 3"
	got := string(linesWith([]byte(log), 2, "apps.argoproj.io", "crd_finalizer"))
	if want := "c crd_finalizer 2\nd crd_finalizer 3\n"; got != want {
		t.Errorf("linesWith = %q, want %q", got, want)
	}
	if got := linesWith([]byte(log), 5, "nothing"); len(got) != 0 {
		t.Errorf("linesWith with no match = %q, want nothing", got)
	}
}

// A CRD whose removal timed out before any read succeeded is described, not dereferenced.
func TestCRDStateOfACRDNeverRead(t *testing.T) {
	if got := crdState(nil); got != "the crd was never read" {
		t.Errorf("crdState(nil) = %q", got)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"finalizers": []any{"customresourcecleanup.apiextensions.k8s.io"}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress", "message": "in progress",
		}}},
	}}
	want := "the crd's finalizers [customresourcecleanup.apiextensions.k8s.io], conditions Terminating=True InstanceDeletionInProgress: in progress"
	if got := crdState(crd); got != want {
		t.Errorf("crdState = %q, want %q", got, want)
	}
}

func TestServedResourceIsTheStorageVersion(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"names": map[string]any{"plural": "widgets"},
			"versions": []any{
				map[string]any{"name": "v1beta1", "served": true, "storage": false},
				map[string]any{"name": "v1", "served": true, "storage": true},
			},
		},
	}}
	gvr, err := servedResource(crd)
	if err != nil {
		t.Fatal(err)
	}
	if want := (schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); gvr != want {
		t.Errorf("servedResource = %v, want %v", gvr, want)
	}
	unstructured.RemoveNestedField(crd.Object, "spec", "versions")
	if _, err := servedResource(crd); err == nil || !strings.Contains(err.Error(), "spec.versions") {
		t.Errorf("servedResource without versions: error %v, want one naming spec.versions", err)
	}
}
