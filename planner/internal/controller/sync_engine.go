package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// engineSuspension applies rollout.EngineSuspension: every owned Application is written with
// automated sync off when the runtime says suspendEngine and no step is in flight (once per
// generation), and back on when it stops saying so; a refusal is recorded for the Ready
// condition.
func (c *Controller) engineSuspension(ctx context.Context, v *view, active *plan.Plan, inflight *v1alpha1.RuntimeRollout) error {
	s := rollout.EngineSuspension(v.rt, inflight)
	v.in.SuspensionRefused = s.Refused
	if !s.Write {
		return nil
	}
	return c.rewriteAll(ctx, v, active, inflight, s.Suspend, s.Tag)
}

// rewriteAll publishes an Apply of every release the stack holds, from the plan each was last
// written from, with automated sync off (suspend) or on.
func (c *Controller) rewriteAll(ctx context.Context, v *view, active *plan.Plan, inflight *v1alpha1.RuntimeRollout, suspend bool, tag string) error {
	if active == nil {
		return nil
	}
	h, err := c.holding(ctx, v.rt, v.at.Plan, v.rollouts, inflight)
	if err != nil {
		return err
	}
	digests := h.Digests
	keys := make([]string, 0, len(digests))
	for k := range digests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := c.cfg.Clock.Now().UTC()
	for _, rel := range keys {
		digest := digests[rel]
		stepID := repairID(digest, tag)
		if err := c.publishOnce(ctx, bus.ApplySubject(v.rt.Name, rel), stepID+"/"+rel,
			bus.NewApplyCommand(v.rt.Name, string(v.rt.UID), bus.StepRef{ID: stepID, Started: now}, rel, v1alpha1.ActionApply, digest, suspend, nil)); err != nil {
			return err
		}
	}
	what := "EngineResumed"
	if suspend {
		what = v1alpha1.ReasonEngineSuspended
	}
	c.event(ctx, v.rt, corev1Normal, what, fmt.Sprintf("%d Applications written with automated sync %s", len(keys), map[bool]string{true: "off", false: "on"}[suspend]))
	return nil
}

// driftRepair reports whether a repair's step ID is a drift repair's (handleDrift), not one of
// the writes of an engine suspension or resumption (tags suspend-g<n>, resume-g<n>).
func driftRepair(id string) bool {
	tag := id[strings.LastIndexByte(id, '/')+1:]
	return strings.HasPrefix(id, "repair/") && !strings.HasPrefix(tag, "suspend-") && !strings.HasPrefix(tag, "resume-")
}

// repairID is a repair's step ID, "repair/<12 hex of the plan digest>/<tag>".
func repairID(digest, tag string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "repair/" + h + "/" + tag
}
