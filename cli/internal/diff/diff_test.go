package diff

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

func TestUnified(t *testing.T) {
	a := strings.Split("a b c d e f g h i j k l", " ")
	b := strings.Split("a b C d e f g h i j k l m", " ")
	got := Unified(a, b, 1)
	want := []string{"@@ -2,3 +2,3 @@", " b", "-c", "+C", " d", "@@ -12,1 +12,2 @@", " l", "+m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := Unified(a, a, 3); len(got) != 0 {
		t.Errorf("equal inputs give %q", got)
	}
	if diff := cmp.Diff([]string{"@@ -0,0 +1,2 @@", "+x", "+y"}, Unified(nil, []string{"x", "y"}, 3)); diff != "" {
		t.Errorf("from nothing (-want +got):\n%s", diff)
	}
}

func examplePlan(t *testing.T, edit func(string) string) *plan.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.ParseBundle([]byte(edit(string(data))))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var settings = appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "reg.example.com/aicr"}

// live renders the plan's Applications as they would be in the cluster, numbers as the API
// server decodes them (int64, float64).
func live(t *testing.T, p *plan.Plan, uid string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for i := range p.Releases {
		app, err := appspec.Build(settings, appspec.Input{Runtime: "cluster", RuntimeUID: uid, PlanDigest: p.Digest(), Release: &p.Releases[i]})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(app)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		ann := u.GetAnnotations()
		ann["operator.aicr.run/step"] = "r-old/3" // step markers do not count
		u.SetAnnotations(ann)
		out = append(out, u)
	}
	return out
}

func TestComputeClassifiesEachRelease(t *testing.T) {
	before := examplePlan(t, func(s string) string { return s })
	apps := live(t, before, "uid-1")
	// gpu-operator gets a new driver, kubeflow-trainer no longer waits for the gate, and
	// dcgm-exporter leaves the bundle.
	after := examplePlan(t, func(s string) string {
		s = strings.Replace(s, `version: "580.95.05"`, `version: "580.105.08"`, 1)
		s = strings.Replace(s, "dependsOn: [jobset, gpu-operator-readiness]", "dependsOn: [jobset]", 1)
		return s[:strings.Index(s, "  # A wrapper chart")] + s[strings.Index(s, "  # Training:"):]
	})
	// Another runtime's Application with the operator's labels.
	apps[0].SetAnnotations(map[string]string{"operator.aicr.run/runtime-uid": "uid-other"})
	res, err := Compute(after, apps, Options{Settings: appspec.Settings{EngineNamespace: "argocd"}, RuntimeUID: "uid-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range res.Changes {
		got[c.Release] = c.Action
	}
	want := map[string]string{
		"cert-manager": Foreign, "kube-prometheus-stack": Unchanged, "nfd": Unchanged, "nodewright-customizations": Unchanged,
		"gpu-operator": Upgrade, "jobset": Unchanged, "gpu-operator-readiness": Unchanged, "kubeflow-trainer": Apply,
		"dcgm-exporter": Remove,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	for _, c := range res.Changes {
		switch c.Release {
		case "gpu-operator":
			if diff := cmp.Diff([]string{"spec.source.helm.valuesObject"}, c.Fields); diff != "" {
				t.Errorf("gpu-operator fields (-want +got):\n%s", diff)
			}
		case "kubeflow-trainer":
			if diff := cmp.Diff([]string{"metadata.annotations[operator.aicr.run/depends-on]"}, c.Fields); diff != "" {
				t.Errorf("kubeflow-trainer fields (-want +got):\n%s", diff)
			}
		}
	}
	var text bytes.Buffer
	if err := Text(&text, res, style.Style{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"against the live Applications in argocd:",
		"Upgrade   gpu-operator", "Remove    dcgm-exporter", "Foreign   cert-manager",
		"--- live/argocd/gpu-operator\n+++ desired/argocd/gpu-operator\n@@",
		`-          version: 580.95.05`, `+          version: 580.105.08`,
		"--- live/argocd/dcgm-exporter\n+++ /dev/null",
		"5 unchanged",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

func TestComputeNothingChanged(t *testing.T) {
	p := examplePlan(t, func(s string) string { return s })
	res, err := Compute(p, live(t, p, "uid-1"), Options{Settings: appspec.Settings{EngineNamespace: "argocd"}, RuntimeUID: "uid-1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Changed(); n != 0 {
		t.Errorf("%d changes on an unchanged stack: %+v", n, res.Changes)
	}
}

func TestComputeNeedsARepository(t *testing.T) {
	p := examplePlan(t, func(s string) string { return s })
	_, err := Compute(p, nil, Options{Settings: appspec.Settings{EngineNamespace: "argocd"}})
	if err == nil || !strings.Contains(err.Error(), "--registry-repository") {
		t.Errorf("err %v, want one naming --registry-repository", err)
	}
	res, err := Compute(p, nil, Options{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Changes {
		if c.Action != Install {
			t.Errorf("%s: %s on an empty cluster, want Install", c.Release, c.Action)
		}
	}
}

func TestNumbersCompareByValue(t *testing.T) {
	a := normalize(map[string]any{"x": int64(1), "y": 2.5})
	b := normalize(map[string]any{"x": json.Number("1.0"), "y": json.Number("25e-1")})
	if d := differing("", a, b); len(d) != 0 {
		t.Errorf("differ at %v", d)
	}
}
