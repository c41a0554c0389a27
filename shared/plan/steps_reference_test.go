package plan

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestStepsMatchesReference compares Steps with the straightforward name-keyed derivation it
// replaced (referenceSteps, kept here as the specification) on random stacks: dependency DAGs
// with readiness gates, and a second version of each with releases changed, rewired, added
// and removed, in both directions and to and from nothing.
func TestStepsMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		a := randomRels(rng, 1+rng.IntN(40))
		b := mutateRels(rng, a)
		from, to := planOf(t, a...), planOf(t, b...)
		for _, c := range []struct {
			name     string
			from, to *Plan
			opts     StepOptions
		}{
			{"forward", from, to, StepOptions{}},
			{"backward", to, from, StepOptions{}},
			{"apply all", from, to, StepOptions{ApplyAll: true}},
			{"first rollout", nil, to, StepOptions{}},
			{"deletion", from, nil, StepOptions{}},
		} {
			want, got := referenceSteps(c.from, c.to, c.opts), Steps(c.from, c.to, c.opts)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("run %d, %s: Steps differs from the reference (-want +got):\n%s", run, c.name, diff)
			}
		}
	}
}

// randomRels is a random DAG of n releases: each may depend on earlier ones and be a gate.
func randomRels(rng *rand.Rand, n int) []rel {
	rels := make([]rel, n)
	for i := range rels {
		rels[i] = rel{name: fmt.Sprintf("r%02d", rng.IntN(100)*100+i), version: "1"}
		for j := range i {
			if rng.IntN(6) == 0 {
				rels[i].deps = append(rels[i].deps, rels[j].name)
			}
		}
		rels[i].gate = len(rels[i].deps) > 0 && rng.IntN(4) == 0
	}
	return rels
}

// mutateRels changes values, gates and dependencies of some releases, drops some (with the
// dependencies on them) and adds new ones.
func mutateRels(rng *rand.Rand, rels []rel) []rel {
	dropped := map[string]bool{}
	var out []rel
	for _, r := range rels {
		if rng.IntN(8) == 0 {
			dropped[r.name] = true
			continue
		}
		r.deps = append([]string(nil), r.deps...)
		switch rng.IntN(6) {
		case 0:
			r.version = "2"
		case 1:
			r.gate = !r.gate
		case 2:
			if len(out) > 0 {
				r.deps = append(r.deps, out[rng.IntN(len(out))].name)
			}
		}
		out = append(out, r)
	}
	for i := range out {
		var deps []string
		seen := map[string]bool{}
		for _, d := range out[i].deps {
			if !dropped[d] && !seen[d] {
				seen[d] = true
				deps = append(deps, d)
			}
		}
		out[i].deps = deps
		out[i].gate = out[i].gate && len(deps) > 0
	}
	for i := range 1 + rng.IntN(3) { // at least one: a bundle is never empty
		r := rel{name: fmt.Sprintf("n%02d", i), version: "1"}
		if len(out) > 0 {
			r.deps = []string{out[rng.IntN(len(out))].name}
			r.gate = rng.IntN(2) == 0
		}
		out = append(out, r)
	}
	return out
}

func referenceSteps(from, to *Plan, opts StepOptions) []v1alpha1.Step {
	var steps []v1alpha1.Step
	action := map[string]v1alpha1.StepAction{}
	if to != nil {
		for i := range to.Releases {
			r := &to.Releases[i]
			old, existed := from.Release(r.Name)
			switch {
			case !existed:
				action[r.Name] = v1alpha1.ActionInstall
			case !sameContent(from, from.byName[r.Name], to, i):
				action[r.Name] = v1alpha1.ActionUpgrade
			case !sameGraph(old, r) || opts.ApplyAll:
				action[r.Name] = v1alpha1.ActionApply
			}
		}
		// Gates re-check whatever changed beneath them; a gate's own step can trigger a gate
		// above it, so iterate in dependency order.
		order := refTopoOrder(to)
		for _, name := range order {
			r, _ := to.Release(name)
			if !r.ReadinessGate || action[name] != "" {
				continue
			}
			for _, d := range refTransitiveDeps(to, name) {
				if action[d] != "" {
					action[name] = v1alpha1.ActionApply
					break
				}
			}
		}
		memo := map[string][]string{}
		for _, name := range order {
			a := action[name]
			if a == "" {
				continue
			}
			r, _ := to.Release(name)
			steps = append(steps, v1alpha1.Step{
				Release:       name,
				Action:        a,
				ReadinessGate: r.ReadinessGate,
				DependsOn:     refNearestWithSteps(to, name, action, memo),
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
			for _, d := range refTransitiveDeps(from, r.Name) {
				if removed[d] {
					dependents[d] = append(dependents[d], r.Name)
				}
			}
		}
		order := refTopoOrder(from)
		for i := len(order) - 1; i >= 0; i-- {
			name := order[i]
			if !removed[name] {
				continue
			}
			r, _ := from.Release(name)
			deps := append([]string(nil), dependents[name]...)
			sort.Strings(deps)
			steps = append(steps, v1alpha1.Step{
				Release:       name,
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

// refTopoOrder orders a plan's releases so that every release follows its dependencies: Kahn's
// algorithm by levels, names sorted within a level.
func refTopoOrder(p *Plan) []string {
	indeg := make(map[string]int, len(p.Releases))
	users := make(map[string][]string, len(p.Releases))
	for _, r := range p.Releases {
		indeg[r.Name] = len(r.DependsOn)
		for _, d := range r.DependsOn {
			users[d] = append(users[d], r.Name)
		}
	}
	var level []string
	for _, r := range p.Releases { // Releases are sorted by name
		if indeg[r.Name] == 0 {
			level = append(level, r.Name)
		}
	}
	order := make([]string, 0, len(p.Releases))
	for len(level) > 0 {
		order = append(order, level...)
		var next []string
		for _, n := range level {
			for _, u := range users[n] {
				indeg[u]--
				if indeg[u] == 0 {
					next = append(next, u)
				}
			}
		}
		sort.Strings(next)
		level = next
	}
	return order
}

// refTransitiveDeps lists every release name reachable through DependsOn, sorted.
func refTransitiveDeps(p *Plan, name string) []string {
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

// refNearestWithSteps returns the releases with steps that name depends on, looking through
// releases without steps to their own dependencies.
func refNearestWithSteps(p *Plan, name string, action map[string]v1alpha1.StepAction, memo map[string][]string) []string {
	set := map[string]bool{}
	r, _ := p.Release(name)
	for _, d := range r.DependsOn {
		if action[d] != "" {
			set[d] = true
			continue
		}
		if _, ok := memo[d]; !ok {
			memo[d] = refNearestWithSteps(p, d, action, memo)
		}
		for _, x := range memo[d] {
			set[x] = true
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
