package plan

import (
	"sort"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// StepOptions tune Steps.
type StepOptions struct {
	// ApplyAll gives every unchanged release an Apply step: the one rollout an engine policy
	// move makes, to the same charts and values.
	ApplyAll bool
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
		order := topoOrder(to)
		for _, name := range order {
			r, _ := to.Release(name)
			if !r.ReadinessGate || action[name] != "" {
				continue
			}
			for _, d := range transitiveDeps(to, name) {
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
				DependsOn:     nearestWithSteps(to, name, action, memo),
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
		order := topoOrder(from)
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

// topoOrder orders a plan's releases so that every release follows its dependencies: Kahn's
// algorithm by levels, names sorted within a level.
func topoOrder(p *Plan) []string {
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

// nearestWithSteps returns the releases with steps that name depends on, looking through
// releases without steps to their own dependencies.
func nearestWithSteps(p *Plan, name string, action map[string]v1alpha1.StepAction, memo map[string][]string) []string {
	set := map[string]bool{}
	r, _ := p.Release(name)
	for _, d := range r.DependsOn {
		if action[d] != "" {
			set[d] = true
			continue
		}
		if _, ok := memo[d]; !ok {
			memo[d] = nearestWithSteps(p, d, action, memo)
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
