package controller

import (
	"context"
	"fmt"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// holding is what each release of the runtime's stack was last written from (rollout.Held):
// the active plan, moved by the rollouts since it became active that did not reach their plan.
// rollouts are the runtime's rollouts; replace, when set, stands in for the one of its name
// (the rollout in flight as just advanced).
func (c *Controller) holding(ctx context.Context, rt *v1alpha1.ClusterRuntime, activeDigest string, rollouts []v1alpha1.RuntimeRollout, replace *v1alpha1.RuntimeRollout) (rollout.Holding, error) {
	active, err := c.loadPlan(ctx, activeDigest)
	if err != nil {
		return rollout.Holding{}, err
	}
	var names []string
	if active != nil {
		names = releaseNames(active)
	}
	if replace != nil {
		rs := make([]v1alpha1.RuntimeRollout, 0, len(rollouts)+1)
		found := false
		for i := range rollouts {
			if rollouts[i].Name == replace.Name {
				rs = append(rs, *replace)
				found = true
				continue
			}
			rs = append(rs, rollouts[i])
		}
		if !found {
			rs = append(rs, *replace)
		}
		rollouts = rs
	}
	return rollout.Held(names, activeDigest, rollouts, string(rt.UID)), nil
}

// heldPlan is the plan of what the stack holds (plan.Compose of each release from the plan it
// was last written from), for the steps of a rollout from the active plan (nil: nothing was
// rolled out yet, but a first rollout that failed may have written releases): nil when the
// stack holds exactly the active plan. bundle names the composed plan's bundle.
func (c *Controller) heldPlan(ctx context.Context, active *plan.Plan, bundle plan.BundleMeta, h rollout.Holding) (*plan.Plan, error) {
	var activeDigest string
	var names []string
	if active != nil {
		activeDigest, names, bundle = active.Digest(), releaseNames(active), active.Bundle
	}
	if !h.Moved(activeDigest, names) {
		return nil, nil
	}
	plans := map[string]*plan.Plan{}
	for _, d := range h.Plans() {
		p, err := c.loadPlan(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("read plan %s a release was last written from: %w", d, err)
		}
		plans[d] = p
	}
	releases := make([]plan.Release, 0, len(h.Digests))
	for name, d := range h.Digests {
		r, ok := plans[d].Release(name)
		if !ok {
			return nil, fmt.Errorf("plan %s, which release %s was last written from, has no release %s", d, name, name)
		}
		releases = append(releases, *r)
	}
	return plan.Compose(bundle, releases)
}
