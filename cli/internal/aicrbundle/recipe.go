package aicrbundle

import (
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// RecipeResultKind is the kind of the recipe `aicr recipe` writes; "Recipe" is its legacy
// spelling, which AICR still reads and normalises.
const RecipeResultKind = "RecipeResult"

// recipeAPIVersions are the RecipeResult apiVersions AICR writes and reads.
var recipeAPIVersions = []string{"aicr.run/v1", "aicr.run/v1alpha2", "aicr.run/v1alpha3", "aicr.run/v1beta2"}

// Recipe is the part of AICR's RecipeResult the import reads: componentRefs (name, namespace,
// chart, version, valuesFile, dependencyRefs, and overrides.enabled/install, which switch a
// component off) and deploymentOrder.
type Recipe struct {
	// Path is the file it was read from, for messages.
	Path       string `json:"-"`
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Version string `json:"version"`
	} `json:"metadata"`
	ComponentRefs   []ComponentRef `json:"componentRefs"`
	DeploymentOrder []string       `json:"deploymentOrder"`
}

// ComponentRef is one of the recipe's components.
type ComponentRef struct {
	Name           string         `json:"name"`
	Namespace      string         `json:"namespace"`
	Chart          string         `json:"chart"`
	Version        string         `json:"version"`
	ValuesFile     string         `json:"valuesFile"`
	DependencyRefs []string       `json:"dependencyRefs"`
	Overrides      map[string]any `json:"overrides"`
}

// Enabled is AICR's rule: a component is off when its overrides set enabled: false or
// install: false; the bundler writes no folder for it.
func (c ComponentRef) Enabled() bool {
	for _, k := range []string{"enabled", "install"} {
		if b, ok := c.Overrides[k].(bool); ok && !b {
			return false
		}
	}
	return true
}

// ParseRecipe reads a RecipeResult and checks what the import relies on: unique names, every
// dependencyRef naming a component of the recipe, and no dependency cycle.
func ParseRecipe(path string, raw []byte) (*Recipe, error) {
	r := &Recipe{Path: path}
	if err := yaml.Unmarshal(raw, r); err != nil {
		return nil, layoutErr(path, "not a %s document: %v", RecipeResultKind, err)
	}
	if r.Kind != RecipeResultKind && r.Kind != "Recipe" && r.Kind != "" {
		return nil, layoutErr(path, "kind %q: kind %s is accepted (the recipe `aicr recipe` writes)", r.Kind, RecipeResultKind)
	}
	if r.APIVersion != "" && !slices.Contains(recipeAPIVersions, r.APIVersion) {
		return nil, layoutErr(path, "apiVersion %q: one of %s is accepted", r.APIVersion, strings.Join(recipeAPIVersions, ", "))
	}
	if len(r.ComponentRefs) == 0 {
		return nil, layoutErr(path, "componentRefs is empty: the recipe names the bundle's components there")
	}
	index := map[string]int{}
	for i, c := range r.ComponentRefs {
		if c.Name == "" {
			return nil, layoutErr(path, "componentRefs[%d].name: a component name is required", i)
		}
		if j, dup := index[c.Name]; dup {
			return nil, layoutErr(path, "componentRefs[%d].name: %q is also componentRefs[%d]; names must be unique", i, c.Name, j)
		}
		index[c.Name] = i
	}
	for i, c := range r.ComponentRefs {
		for j, d := range c.DependencyRefs {
			if _, ok := index[d]; !ok {
				return nil, layoutErr(path, "componentRefs[%d].dependencyRefs[%d]: unknown dependency %q; dependencyRefs name components of the recipe (%s)", i, j, d, strings.Join(r.names(), ", "))
			}
			if d == c.Name {
				return nil, layoutErr(path, "componentRefs[%d].dependencyRefs[%d]: %q depends on itself; name other components", i, j, d)
			}
		}
	}
	if cycle := r.cycle(index); cycle != nil {
		return nil, layoutErr(path, "componentRefs[%d].dependencyRefs: dependency cycle %s; dependencyRefs must form a directed acyclic graph", index[cycle[0]], strings.Join(cycle, " -> "))
	}
	return r, nil
}

func (r *Recipe) names() []string {
	out := make([]string, len(r.ComponentRefs))
	for i, c := range r.ComponentRefs {
		out[i] = c.Name
	}
	return out
}

// ref returns the component named name.
func (r *Recipe) ref(name string) (int, *ComponentRef) {
	for i := range r.ComponentRefs {
		if r.ComponentRefs[i].Name == name {
			return i, &r.ComponentRefs[i]
		}
	}
	return -1, nil
}

// cycle returns one dependency cycle (first and last element equal), visiting components in
// document order so the answer is the same every time, or nil.
func (r *Recipe) cycle(index map[string]int) []string {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(r.ComponentRefs))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = open
		stack = append(stack, r.ComponentRefs[i].Name)
		for _, d := range r.ComponentRefs[i].DependencyRefs {
			j := index[d]
			switch state[j] {
			case open:
				for k, n := range stack {
					if n == d {
						return append(append([]string{}, stack[k:]...), d)
					}
				}
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return nil
	}
	for i := range r.ComponentRefs {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// chartName is the chart a componentRef deploys, as AICR derives it: the chart's last path
// element, else the component's name.
func (c ComponentRef) chartName() string {
	ch := c.Chart
	if i := strings.LastIndex(ch, "/"); i >= 0 {
		ch = ch[i+1:]
	}
	if ch == "" {
		return c.Name
	}
	return ch
}
