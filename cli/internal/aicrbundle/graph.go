package aicrbundle

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
)

// Planned is one component of the bundle the import writes: a folder, what it depends on and
// whether it is a readiness gate.
type Planned struct {
	Folder        *Folder
	Namespace     string
	DependsOn     []string
	ReadinessGate bool
	// Parent is the component an injected -pre/-post/-readiness folder belongs to ("" for a
	// component's own folder); Role is its suffix.
	Parent, Role string
}

// Plan works out every folder's namespace, dependencies and gate flag.
//
// With a recipe, a component depends on its dependencyRefs, each expanded to the dependency's
// own folder and the -post and -readiness folders AICR injected after it (a dependent waits for
// the gate, as AICR's sequential install does); a component's -pre folder comes before it and
// after the component's dependencies; -post and -readiness depend on their component (the gate
// also on -post). Without a recipe the folders form a chain in their numbered order, each
// depending on the one before; a gate depends on its component too.
//
// A readiness gate is AICR's NNN-<component>-readiness folder: the gate chart the bundler writes
// after <component> (bundle-info.yaml names <component> as the release's component).
func Plan(l *Layout, r *Recipe) ([]Planned, error) {
	byName := map[string]*Folder{}
	for i := range l.Folders {
		byName[l.Folders[i].Name] = &l.Folders[i]
	}
	out := make([]Planned, len(l.Folders))
	for i := range l.Folders {
		f := &l.Folders[i]
		p := Planned{Folder: f}
		p.Parent, p.Role = injected(f, byName)
		out[i] = p
	}
	component := func(p Planned) string { return cmp.Or(p.Parent, p.Folder.Name) }
	// Namespaces: the build record's, else the recipe's.
	for i := range out {
		p := &out[i]
		p.Namespace = p.Folder.Namespace
		if p.Namespace == "" && r != nil {
			if _, ref := r.ref(component(*p)); ref != nil {
				p.Namespace = ref.Namespace
			}
		}
		if p.Namespace == "" {
			return nil, layoutErr(p.Folder.Path, "no namespace for release %s: %s layout.releases[].namespace names it, else the recipe's componentRefs[].namespace (--recipe)", p.Folder.Name, BundleInfoFile)
		}
		p.ReadinessGate = p.Role == SuffixReadiness
	}
	if r == nil {
		for i := range out {
			if i > 0 {
				out[i].DependsOn = []string{l.Folders[i-1].Name}
			}
			if out[i].ReadinessGate {
				out[i].DependsOn = appendUnique(out[i].DependsOn, out[i].Parent)
			}
		}
		return out, nil
	}
	if err := checkRecipe(l, r, out); err != nil {
		return nil, err
	}
	// expand names a component's releases a dependent waits for.
	expand := func(name string) []string {
		deps := []string{name}
		for _, s := range []string{SuffixPost, SuffixReadiness} {
			if f, ok := byName[name+s]; ok {
				deps = append(deps, f.Name)
			}
		}
		return deps
	}
	for i := range out {
		p := &out[i]
		_, ref := r.ref(component(*p))
		var deps []string
		switch p.Role {
		case "", SuffixPre:
			for _, d := range ref.DependencyRefs {
				if _, dr := r.ref(d); !dr.Enabled() {
					continue // off: the bundler wrote no folder for it
				}
				if _, ok := byName[d]; !ok {
					j, _ := r.ref(ref.Name)
					return nil, layoutErr(r.Path, "componentRefs[%d].dependencyRefs: %s depends on %q, which has no folder in %s; the bundle must hold every component its components depend on", j, ref.Name, d, l.Dir)
				}
				deps = append(deps, expand(d)...)
			}
			if pre, ok := byName[ref.Name+SuffixPre]; ok && p.Role == "" {
				deps = append(deps, pre.Name)
			}
		case SuffixPost:
			deps = []string{p.Parent}
		case SuffixReadiness:
			deps = []string{p.Parent}
			if post, ok := byName[p.Parent+SuffixPost]; ok {
				deps = append(deps, post.Name)
			}
		}
		for _, d := range deps {
			p.DependsOn = appendUnique(p.DependsOn, d)
		}
		slices.Sort(p.DependsOn)
	}
	return out, nil
}

// injected says whether f is a folder AICR injected around another component: its parent and
// suffix, or "", "".
func injected(f *Folder, byName map[string]*Folder) (parent, role string) {
	for _, s := range []string{SuffixPre, SuffixPost, SuffixReadiness} {
		base, ok := strings.CutSuffix(f.Name, s)
		if !ok || byName[base] == nil {
			continue
		}
		if f.Component != f.Name && f.Component != base {
			continue // the build record names another component: an ordinary release
		}
		return base, s
	}
	return "", ""
}

// checkRecipe holds the recipe and the folders to each other: every component's folder is one of
// the recipe's components, every enabled component has its folder, the folders follow
// deploymentOrder, and an upstream folder's chart and version are the ones the recipe names.
func checkRecipe(l *Layout, r *Recipe, out []Planned) error {
	folders := map[string]*Folder{}
	var names []string
	for _, p := range out {
		if p.Parent != "" {
			continue
		}
		f := p.Folder
		i, ref := r.ref(f.Name)
		if ref == nil {
			return layoutErr(f.Path, "component %s is not in %s componentRefs (%s); the recipe is not the one this bundle was built from", f.Name, r.Path, strings.Join(r.names(), ", "))
		}
		if u := f.Upstream; u != nil && ref.Chart != "" && ref.chartName() != u.Name() {
			return layoutErr(inFolder(f, UpstreamEnvFile), "CHART %q, but %s componentRefs[%d].chart is %q", u.Chart, r.Path, i, ref.Chart)
		}
		if u := f.Upstream; u != nil && ref.Version != "" && ref.Version != u.Version {
			return layoutErr(inFolder(f, UpstreamEnvFile), "VERSION %q, but %s componentRefs[%d].version is %q", u.Version, r.Path, i, ref.Version)
		}
		folders[f.Name] = f
		names = append(names, f.Name)
	}
	for i, ref := range r.ComponentRefs {
		if _, ok := folders[ref.Name]; !ok && ref.Enabled() && slices.ContainsFunc(r.ComponentRefs, func(c ComponentRef) bool { return slices.Contains(c.DependencyRefs, ref.Name) }) {
			return layoutErr(r.Path, "componentRefs[%d] %s has no folder in %s, and components depend on it; the bundle must hold it", i, ref.Name, l.Dir)
		}
	}
	if len(r.DeploymentOrder) == 0 {
		return nil
	}
	pos := map[string]int{}
	for i, n := range r.DeploymentOrder {
		pos[n] = i
	}
	last := -1
	for _, n := range names {
		at, ok := pos[n]
		if !ok {
			return layoutErr(folders[n].Path, "component %s is not in %s deploymentOrder (%s)", n, r.Path, strings.Join(r.DeploymentOrder, ", "))
		}
		if at < last {
			return layoutErr(folders[n].Path, "the folders' numbered order puts %s after %s, but %s deploymentOrder puts it before; AICR numbers the folders in deploymentOrder", n, r.DeploymentOrder[last], r.Path)
		}
		last = at
	}
	return nil
}

func inFolder(f *Folder, file string) string { return filepath.Join(f.Path, file) }

func appendUnique(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
