package testenv

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

func TestArgoCRDsAreFoundWithoutTheArgoCDBinary(t *testing.T) {
	dir, err := argoCRDDir(t.TempDir()) // an empty tools folder: falls back to the module cache
	if err != nil {
		t.Skipf("argo-cd module not in the module cache and not downloadable: %v", err)
	}
	t.Logf("argo cd crds from %s", dir)
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
