// Package graph draws a rollout's (or a plan's) dependency DAG with each release's step and
// state: as layered text for a terminal (arrows, colours by state), as Graphviz dot and as a
// Mermaid flowchart.
package graph

import (
	"cmp"
	"slices"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// StateUnchanged is the state of a release the rollout has no step for.
const StateUnchanged = "Unchanged"

// Node is one release.
type Node struct {
	// Name is the release (and Application) name.
	Name string `json:"name"`
	// Step is the step's index in the rollout, 0 when the release has no step.
	Step int32 `json:"step,omitempty"`
	// Action is the step's action (Install, Upgrade, Apply, Remove).
	Action string `json:"action,omitempty"`
	// State is the step's state, or Unchanged.
	State string `json:"state"`
	// ReadinessGate marks a readiness release.
	ReadinessGate bool `json:"readinessGate,omitempty"`
	// Layer is the node's depth: 0 for a release that waits for nothing, else one more than
	// the deepest release it comes after.
	Layer int `json:"layer"`
	// After names the releases that must be done first (the incoming edges).
	After []string `json:"after,omitempty"`
}

// Edge says From is done before To.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Graph is the DAG of one rollout or plan.
type Graph struct {
	// Title says what is drawn: "rollout r-1", "plan sha256:...".
	Title string `json:"title"`
	// Steps counts the nodes with a step; Succeeded those whose step succeeded.
	Steps     int `json:"steps"`
	Succeeded int `json:"succeeded"`
	// Nodes in drawing order: by layer, then step index, then name.
	Nodes []Node `json:"nodes"`
	// Edges in the order of Nodes.
	Edges []Edge `json:"edges"`
}

// FromSteps draws the steps alone: an edge for each name in a step's DependsOn.
func FromSteps(title string, steps []v1alpha1.Step) *Graph {
	b := newBuilder()
	for i := range steps {
		b.step(&steps[i])
	}
	for _, st := range steps {
		for _, d := range st.DependsOn {
			b.edge(d, st.Release)
		}
	}
	return b.build(title)
}

// FromPlan draws every release of to (nil when the runtime is deleted) with its dependencies,
// the steps attached by release, and the Remove steps of releases that left (their edges from
// the steps: a release is removed after the releases that depended on it).
func FromPlan(title string, to *plan.Plan, steps []v1alpha1.Step) *Graph {
	b := newBuilder()
	if to != nil {
		for _, r := range to.Releases {
			b.node(r.Name, r.ReadinessGate)
		}
	}
	for i := range steps {
		b.step(&steps[i])
	}
	if to != nil {
		for _, r := range to.Releases {
			for _, d := range r.DependsOn {
				b.edge(d, r.Name)
			}
		}
	}
	for _, st := range steps {
		if st.Action != v1alpha1.ActionRemove {
			continue
		}
		for _, d := range st.DependsOn {
			b.edge(d, st.Release)
		}
	}
	return b.build(title)
}

type builder struct {
	nodes map[string]*Node
	order []string
	edges map[Edge]bool
}

func newBuilder() *builder {
	return &builder{nodes: map[string]*Node{}, edges: map[Edge]bool{}}
}

func (b *builder) node(name string, gate bool) *Node {
	n, ok := b.nodes[name]
	if !ok {
		n = &Node{Name: name, State: StateUnchanged}
		b.nodes[name] = n
		b.order = append(b.order, name)
	}
	n.ReadinessGate = n.ReadinessGate || gate
	return n
}

func (b *builder) step(st *v1alpha1.Step) {
	n := b.node(st.Release, st.ReadinessGate)
	n.Step, n.Action, n.State = st.Index, string(st.Action), cmp.Or(string(st.State), string(v1alpha1.StepPending))
}

func (b *builder) edge(from, to string) {
	if from == to {
		return
	}
	b.node(from, false)
	b.node(to, false)
	b.edges[Edge{From: from, To: to}] = true
}

func (b *builder) build(title string) *Graph {
	g := &Graph{Title: title}
	in := map[string][]string{}
	out := map[string][]string{}
	for e := range b.edges {
		in[e.To] = append(in[e.To], e.From)
		out[e.From] = append(out[e.From], e.To)
	}
	// Longest-path layers, in Kahn's order; a cycle (plans have none) lands after the rest.
	indeg := map[string]int{}
	for _, name := range b.order {
		indeg[name] = len(in[name])
	}
	var queue []string
	for _, name := range b.order {
		if indeg[name] == 0 {
			queue = append(queue, name)
		}
	}
	seen := 0
	maxLayer := 0
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		seen++
		n := b.nodes[name]
		maxLayer = max(maxLayer, n.Layer)
		for _, to := range out[name] {
			m := b.nodes[to]
			m.Layer = max(m.Layer, n.Layer+1)
			if indeg[to]--; indeg[to] == 0 {
				queue = append(queue, to)
			}
		}
	}
	if seen < len(b.order) {
		for _, name := range b.order {
			if indeg[name] > 0 {
				b.nodes[name].Layer = maxLayer + 1
			}
		}
	}
	for _, name := range b.order {
		n := b.nodes[name]
		n.After = slices.Clone(in[name])
		slices.SortFunc(n.After, func(x, y string) int { return compareNodes(b.nodes[x], b.nodes[y]) })
		g.Nodes = append(g.Nodes, *n)
		if n.Step > 0 {
			g.Steps++
			if n.State == string(v1alpha1.StepSucceeded) {
				g.Succeeded++
			}
		}
	}
	slices.SortFunc(g.Nodes, func(x, y Node) int {
		if c := cmp.Compare(x.Layer, y.Layer); c != 0 {
			return c
		}
		return compareNodes(&x, &y)
	})
	for _, n := range g.Nodes {
		for _, from := range n.After {
			g.Edges = append(g.Edges, Edge{From: from, To: n.Name})
		}
	}
	return g
}

// compareNodes orders releases with a step by index, before those without, then by name.
func compareNodes(x, y *Node) int {
	switch {
	case x.Step > 0 && y.Step > 0:
		if c := cmp.Compare(x.Step, y.Step); c != 0 {
			return c
		}
	case x.Step > 0:
		return -1
	case y.Step > 0:
		return 1
	}
	return cmp.Compare(x.Name, y.Name)
}

// Layers groups the nodes by layer, in drawing order.
func (g *Graph) Layers() [][]Node {
	var out [][]Node
	for _, n := range g.Nodes {
		for len(out) <= n.Layer {
			out = append(out, nil)
		}
		out[n.Layer] = append(out[n.Layer], n)
	}
	return out
}
