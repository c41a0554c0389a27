package graph

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

func examplePlan(t *testing.T) *plan.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.ParseBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A rollout of the example bundle, part way: the first four steps done, gpu-operator in flight.
func rolloutSteps(p *plan.Plan) []v1alpha1.Step {
	steps := plan.Steps(nil, p, plan.StepOptions{})
	for i := range steps {
		switch {
		case i < 4:
			steps[i].State = v1alpha1.StepSucceeded
		case steps[i].Release == "gpu-operator":
			steps[i].State = v1alpha1.StepInProgress
		}
	}
	return steps
}

func TestFromPlanLayersFollowDependencies(t *testing.T) {
	p := examplePlan(t)
	g := FromPlan("rollout r-1", p, rolloutSteps(p))
	layer := map[string]int{}
	for _, n := range g.Nodes {
		layer[n.Name] = n.Layer
	}
	// Every release sits below everything it depends on, and on the first layer when it
	// depends on nothing.
	for _, r := range p.Releases {
		if len(r.DependsOn) == 0 && layer[r.Name] != 0 {
			t.Errorf("%s depends on nothing but is on layer %d", r.Name, layer[r.Name])
		}
		for _, d := range r.DependsOn {
			if layer[d] >= layer[r.Name] {
				t.Errorf("%s (layer %d) depends on %s (layer %d)", r.Name, layer[r.Name], d, layer[d])
			}
		}
	}
	if g.Steps != 9 || g.Succeeded != 4 {
		t.Errorf("steps %d succeeded %d, want 9 and 4", g.Steps, g.Succeeded)
	}
	want := map[string][]string{
		"gpu-operator":     {"cert-manager", "kube-prometheus-stack", "nfd", "nodewright-customizations"},
		"kubeflow-trainer": {"jobset", "gpu-operator-readiness"},
	}
	for _, n := range g.Nodes {
		if w, ok := want[n.Name]; ok {
			if diff := cmp.Diff(w, n.After); diff != "" {
				t.Errorf("%s after (-want +got):\n%s", n.Name, diff)
			}
		}
	}
}

func TestFromPlanShowsUnchangedAndRemoved(t *testing.T) {
	p := examplePlan(t)
	steps := []v1alpha1.Step{
		{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepSucceeded},
		{Index: 2, Release: "old-exporter", Action: v1alpha1.ActionRemove, State: v1alpha1.StepAwaitingApproval, DependsOn: []string{"old-dashboard"}},
		{Index: 3, Release: "old-dashboard", Action: v1alpha1.ActionRemove, State: v1alpha1.StepPending},
	}
	g := FromPlan("rollout r-2", p, steps)
	byName := map[string]Node{}
	for _, n := range g.Nodes {
		byName[n.Name] = n
	}
	if n := byName["nfd"]; n.State != StateUnchanged || n.Step != 0 {
		t.Errorf("nfd without a step: %+v, want Unchanged", n)
	}
	if n := byName["old-exporter"]; n.Action != "Remove" || n.State != "AwaitingApproval" || n.Layer <= byName["old-dashboard"].Layer {
		t.Errorf("old-exporter %+v: want a Remove step below old-dashboard (%+v)", n, byName["old-dashboard"])
	}
	if g.Steps != 3 || g.Succeeded != 1 {
		t.Errorf("steps %d succeeded %d", g.Steps, g.Succeeded)
	}
}

func TestFromStepsUsesDependsOn(t *testing.T) {
	g := FromSteps("rollout r-3", []v1alpha1.Step{
		{Index: 2, Release: "b", DependsOn: []string{"a"}, State: v1alpha1.StepPending, Action: v1alpha1.ActionInstall},
		{Index: 1, Release: "a", State: v1alpha1.StepSucceeded, Action: v1alpha1.ActionInstall},
		{Index: 3, Release: "c", DependsOn: []string{"a", "b"}, State: v1alpha1.StepPending, Action: v1alpha1.ActionInstall},
	})
	var order []string
	for _, n := range g.Nodes {
		order = append(order, n.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Edge{{"a", "b"}, {"a", "c"}, {"b", "c"}}, g.Edges); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
}

func TestTextDrawsLayersArrowsAndColours(t *testing.T) {
	p := examplePlan(t)
	g := FromPlan("rollout r-1", p, rolloutSteps(p))
	var plain, coloured bytes.Buffer
	if err := Text(&plain, g, style.Style{}); err != nil {
		t.Fatal(err)
	}
	if err := Text(&coloured, g, style.Style{Color: true}); err != nil {
		t.Fatal(err)
	}
	out := plain.String()
	for _, want := range []string{
		"rollout r-1: 4/9 steps succeeded",
		"1 ┬ ✓ cert-manager",
		"  ▼\n2 ┬ ● gpu-operator",
		"Install  InProgress",
		"← cert-manager, kube-prometheus-stack, nfd, nodewright-customizations",
		"gpu-operator-readiness (gate)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("plain text has escape sequences:\n%q", out)
	}
	if !strings.Contains(coloured.String(), "\x1b[32m✓\x1b[0m") || !strings.Contains(coloured.String(), "\x1b[1;33m●\x1b[0m") {
		t.Errorf("coloured text does not colour Succeeded green and InProgress yellow:\n%q", coloured.String())
	}
}

func TestDotAndMermaid(t *testing.T) {
	p := examplePlan(t)
	g := FromPlan("rollout r-1", p, rolloutSteps(p))
	var dot, mm bytes.Buffer
	if err := Dot(&dot, g); err != nil {
		t.Fatal(err)
	}
	if err := Mermaid(&mm, g); err != nil {
		t.Fatal(err)
	}
	d := dot.String()
	if !strings.HasPrefix(d, "digraph rollout {") || !strings.HasSuffix(d, "}\n") {
		t.Errorf("dot is not one digraph:\n%s", d)
	}
	if got := strings.Count(d, " -> "); got != len(g.Edges) {
		t.Errorf("dot has %d edges, the graph %d", got, len(g.Edges))
	}
	for _, want := range []string{
		`"gpu-operator" [label="gpu-operator\n#5 Install · InProgress", fillcolor="#fff3c4"`,
		`"cert-manager" -> "gpu-operator";`,
		`label="rollout r-1: 4/9 steps succeeded"`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("dot lacks %s:\n%s", want, d)
		}
	}
	m := mm.String()
	if !strings.Contains(m, "flowchart LR\n") || !strings.Contains(m, `title: "rollout r-1: 4/9 steps succeeded"`) {
		t.Errorf("mermaid header:\n%s", m)
	}
	if got := len(regexp.MustCompile(`(?m)^  n\d+ --> n\d+$`).FindAllString(m, -1)); got != len(g.Edges) {
		t.Errorf("mermaid has %d edges, the graph %d:\n%s", got, len(g.Edges), m)
	}
	if !strings.Contains(m, "classDef sInProgress fill:#fff3c4") || !strings.Contains(m, ":::sSucceeded") {
		t.Errorf("mermaid classes by state:\n%s", m)
	}
}

func TestLabelsAreQuoted(t *testing.T) {
	g := FromSteps(`rollout "x"`, []v1alpha1.Step{{Index: 1, Release: `a"b`, State: "Weird<state>", Action: "Install"}})
	var dot, mm bytes.Buffer
	_ = Dot(&dot, g)
	_ = Mermaid(&mm, g)
	if !strings.Contains(dot.String(), `"a\"b" [label="a\"b\n#1 Install · Weird<state>"`) {
		t.Errorf("dot quoting:\n%s", dot.String())
	}
	if strings.Contains(mm.String(), `a"b`) || !strings.Contains(mm.String(), ":::sWeirdstate") {
		t.Errorf("mermaid quoting:\n%s", mm.String())
	}
}
