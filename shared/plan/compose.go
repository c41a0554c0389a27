package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Compose makes the plan of what a stack holds when its releases were last written from
// different plans (a rollout that ended without reaching its plan leaves the releases it wrote
// at it, and nothing is rolled back): each release taken whole from the plan it was written
// from, in name order, sealed like any plan, so Steps can start from it. It is a view, never
// stored: its digest names no ConfigMap.
func Compose(bundle BundleMeta, releases []Release) (*Plan, error) {
	p := &Plan{APIVersion: PlanAPIVersion, Bundle: bundle, Releases: slices.Clone(releases)}
	slices.SortFunc(p.Releases, func(a, b Release) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(p.Releases); i++ {
		if p.Releases[i].Name == p.Releases[i-1].Name {
			return nil, fmt.Errorf("compose plan: release %s given twice", p.Releases[i].Name)
		}
	}
	p.index()
	if err := p.seal(0); err != nil {
		return nil, fmt.Errorf("compose plan: %w", err)
	}
	return p, nil
}
