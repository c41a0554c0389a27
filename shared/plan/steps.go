package plan

import (
	"slices"
	"sort"
	"strings"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// StepOptions tune Steps.
type StepOptions struct {
	// ApplyAll gives every unchanged release an Apply step: the one rollout an engine policy
	// move makes, to the same charts and values.
	ApplyAll bool
	// Force gives the named releases an Apply step even when unchanged: releases a rollout
	// that ended without success started a step on and did not finish, which were never
	// judged ready at what they hold.
	Force map[string]bool
}

// Action is the step a release in both plans takes, the rule Steps and `kubectl aicr diff`
// share: Upgrade when its content changed (chart, namespace or values: what an Application's
// spec.source and spec.destination carry), else Apply when anything else about it changed (its
// dependencies, its gate flag, or a step asked for it), else none ("").
func Action(contentChanged, otherChanged bool) v1alpha1.StepAction {
	switch {
	case contentChanged:
		return v1alpha1.ActionUpgrade
	case otherChanged:
		return v1alpha1.ActionApply
	}
	return ""
}

// Steps derives a rollout's steps from the plan the stack is at (from, nil for nothing) to the
// plan it moves to (to, nil when the runtime is deleted):
//
//   - Install for a release new in to, Upgrade for one whose chart, namespace or values
//     changed, Apply for one whose dependencies or gate flag changed (or every unchanged one
//     with ApplyAll), in dependency order of to;
//   - a readiness gate gets an Apply step whenever something it depends on (transitively)
//     has a step, so it checks what changed;
//   - Remove for a release that left, after the forward steps, in reverse dependency order of
//     from.
//
// A step's DependsOn names the steps of this rollout that must succeed first: the nearest
// releases with steps among its transitive dependencies. Indexes start at 1. The result is
// deterministic.
func Steps(from, to *Plan, opts StepOptions) []v1alpha1.Step {
	var steps []v1alpha1.Step
	if to != nil {
		g := newGraph(to)
		action := make([]v1alpha1.StepAction, len(to.Releases))
		for i := range to.Releases {
			r := &to.Releases[i]
			old, existed := from.Release(r.Name)
			if !existed {
				action[i] = v1alpha1.ActionInstall
				continue
			}
			action[i] = Action(!sameContent(from, from.byName[r.Name], to, i), !sameGraph(old, r) || opts.ApplyAll || opts.Force[r.Name])
		}
		// Gates re-check whatever changed beneath them; a gate's own step can trigger a gate
		// above it. In dependency order, whether something beneath a release has a step is
		// known from its direct dependencies.
		order := g.order()
		changedBelow := make([]bool, len(to.Releases))
		for _, i := range order {
			for _, d := range g.deps[i] {
				if action[d] != "" || changedBelow[d] {
					changedBelow[i] = true
					break
				}
			}
			if to.Releases[i].ReadinessGate && action[i] == "" && changedBelow[i] {
				action[i] = v1alpha1.ActionApply
			}
		}
		near := newNearestSteps(g, action)
		steps = slices.Grow(steps, len(action)-countEmpty(action)) // a Step is large: grow once
		for _, i := range order {
			if action[i] == "" {
				continue
			}
			r := &to.Releases[i]
			steps = append(steps, v1alpha1.Step{
				Release:       r.Name,
				Action:        action[i],
				ReadinessGate: r.ReadinessGate,
				DependsOn:     g.sortedNames(near.of(i)),
				State:         v1alpha1.StepPending,
			})
		}
	}
	if from != nil {
		removed := map[string]bool{}
		for _, r := range from.Releases {
			if _, kept := to.Release(r.Name); !kept {
				removed[r.Name] = true
			}
		}
		// Reverse dependency order: a release goes after every removed release that depended
		// on it.
		dependents := map[string][]string{}
		for _, r := range from.Releases {
			if !removed[r.Name] {
				continue
			}
			for _, d := range transitiveDeps(from, r.Name) {
				if removed[d] {
					dependents[d] = append(dependents[d], r.Name)
				}
			}
		}
		g := newGraph(from)
		order := g.order()
		steps = slices.Grow(steps, len(removed))
		for k := len(order) - 1; k >= 0; k-- {
			r := &from.Releases[order[k]]
			if !removed[r.Name] {
				continue
			}
			deps := append([]string(nil), dependents[r.Name]...)
			sort.Strings(deps)
			steps = append(steps, v1alpha1.Step{
				Release:       r.Name,
				Action:        v1alpha1.ActionRemove,
				ReadinessGate: r.ReadinessGate,
				DependsOn:     deps,
				State:         v1alpha1.StepPending,
			})
		}
	}
	for i := range steps {
		steps[i].Index = int32(i + 1)
	}
	return steps
}

func countEmpty(action []v1alpha1.StepAction) int {
	n := 0
	for _, a := range action {
		if a == "" {
			n++
		}
	}
	return n
}

// graph is a plan's dependency graph by release index. Steps walks it for every release, and
// doing so through maps keyed by name (and a map and a sort per release for the nearest steps)
// took longer than resolving the plan at 10 000 releases.
type graph struct {
	p *Plan
	// deps are the indexes of each release's dependencies; notInPlan marks a name the plan
	// does not hold (only a plan decoded from a crafted document has one).
	deps [][]int
	// users are the indexes of the releases that depend on each release.
	users [][]int
}

const notInPlan = -1

func newGraph(p *Plan) *graph {
	n := len(p.Releases)
	g := &graph{p: p, deps: make([][]int, n), users: make([][]int, n)}
	edges := 0
	for i := range p.Releases {
		edges += len(p.Releases[i].DependsOn)
	}
	// Both adjacency lists live in one backing array each, instead of an allocation or more
	// per release: the dependencies first, counting each release's users, then the users.
	deps := make([]int, 0, edges)
	userCount := make([]int, n)
	for i := range p.Releases {
		start := len(deps)
		for _, d := range p.Releases[i].DependsOn {
			j, ok := p.byName[d]
			if !ok {
				j = notInPlan
			} else {
				userCount[j]++
			}
			deps = append(deps, j)
		}
		g.deps[i] = deps[start:len(deps):len(deps)]
	}
	users := make([]int, edges)
	offset := 0
	for j, c := range userCount {
		g.users[j] = users[offset : offset : offset+c]
		offset += c
	}
	for i, ds := range g.deps {
		for _, j := range ds {
			if j != notInPlan {
				g.users[j] = append(g.users[j], i) // within its capacity: no allocation
			}
		}
	}
	return g
}

// order lists release indexes so that every release follows its dependencies: Kahn's algorithm
// by levels, names sorted within a level. A release with an unknown dependency (or on a cycle)
// never becomes ready and is left out, with everything that depends on it.
func (g *graph) order() []int {
	rs := g.p.Releases
	indeg := make([]int, len(rs))
	var level []int
	for i := range rs {
		indeg[i] = len(g.deps[i])
		if indeg[i] == 0 {
			level = append(level, i)
		}
	}
	byName := func(a, b int) int { return strings.Compare(rs[a].Name, rs[b].Name) }
	slices.SortFunc(level, byName)
	order := make([]int, 0, len(rs))
	var next []int
	for len(level) > 0 {
		order = append(order, level...)
		next = next[:0]
		for _, i := range level {
			for _, u := range g.users[i] {
				indeg[u]--
				if indeg[u] == 0 {
					next = append(next, u)
				}
			}
		}
		slices.SortFunc(next, byName)
		level, next = next, level
	}
	return order
}

// sortedNames returns the names of releases, sorted; an empty (not nil) list for none.
func (g *graph) sortedNames(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.p.Releases[i].Name
	}
	sort.Strings(out)
	return out
}

// nearestSteps finds, for a release, the releases with steps that it depends on, looking
// through releases without steps to their own dependencies.
type nearestSteps struct {
	g      *graph
	action []v1alpha1.StepAction
	// memo holds the result for releases without steps (when done), computed once each.
	memo [][]int
	done []bool
	// mark deduplicates one result: mark[j] == stamp when j is already in it.
	mark  []int
	stamp int
}

func newNearestSteps(g *graph, action []v1alpha1.StepAction) *nearestSteps {
	n := len(action)
	return &nearestSteps{g: g, action: action, memo: make([][]int, n), done: make([]bool, n), mark: make([]int, n)}
}

// of returns the indexes of the nearest releases with steps beneath release i, in no order.
// Every dependency of i must be in the plan: it is, for a release that order lists.
func (n *nearestSteps) of(i int) []int {
	// Memoize the step-less dependencies first: that recursion reuses mark.
	for _, d := range n.g.deps[i] {
		if n.action[d] == "" && !n.done[d] {
			n.memo[d] = n.of(d)
			n.done[d] = true
		}
	}
	n.stamp++
	var out []int
	add := func(j int) {
		if n.mark[j] != n.stamp {
			n.mark[j] = n.stamp
			out = append(out, j)
		}
	}
	for _, d := range n.g.deps[i] {
		if n.action[d] != "" {
			add(d)
			continue
		}
		for _, x := range n.memo[d] {
			add(x)
		}
	}
	return out
}

// transitiveDeps lists every release name reachable through DependsOn, sorted.
func transitiveDeps(p *Plan, name string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		r, ok := p.Release(n)
		if !ok {
			return
		}
		for _, d := range r.DependsOn {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(name)
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
