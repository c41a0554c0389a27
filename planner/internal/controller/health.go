package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// onHealth records a verdict in the runtime's release list (status.ObserveHealth decides) and,
// when it changed, queues the runtime so its Ready condition follows at once. awaited says a
// step in flight took the verdict. Nothing but the runtime's status is written: a release that
// stops being ready gets no Application write from this.
func (c *Controller) onHealth(ctx context.Context, v *bus.ReleaseVerdict, awaited bool) error {
	if awaited && !v.Ready {
		return nil // the step's own progress: its rollout records it
	}
	unlock := c.locks.lock(v.Runtime)
	defer unlock()
	rt, err := c.store.GetRuntime(ctx, v.Runtime)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runtime %s: %w", v.Runtime, err)
	}
	if rt.DeletionTimestamp != nil || rollout.ValidationDisabled(rt) {
		return nil // being removed, or readiness is not judged
	}
	now := c.cfg.Clock.Now()
	var floor *v1alpha1.Verdict
	if name, index, ok := v1alpha1.ParseStepID(v.StepID); ok && !awaited {
		r, err := c.store.GetRollout(ctx, name)
		switch {
		case err == nil:
			if s := rollout.Step(r, index); s != nil && s.Release == v.Release && s.Verdict != nil {
				floor = s.Verdict
			}
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get rollout %s: %w", name, err)
		}
	}
	if _, changed := status.ObserveHealth(rt.Status.Releases, v, floor, awaited, now); !changed {
		return nil
	}
	err = c.patchStatus(ctx, rt.Name, func(st *v1alpha1.ClusterRuntimeStatus, _ int64) {
		st.Releases, _ = status.ObserveHealth(st.Releases, v, floor, awaited, now)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record the verdict on %s in runtime %s: %w", v.Release, rt.Name, err)
	}
	logging.From(ctx).Info().Str(logging.KeyRelease, v.Release).Str(logging.KeyStep, v.StepID).Bool("ready", v.Ready).Msg("release verdict after its step recorded")
	c.queue.Add(rt.Name)
	return nil
}
