package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// readRollouts lists the runtime's rollouts oldest first, labels every ended one with its
// outcome, adopts a success the runtime's status did not record (rollout.Adopt: the planner
// stopped in between) and returns the rollout in flight (rollout.InFlight). A second one in
// flight cannot come from this planner: it is superseded if it never started, else left to
// its timeout.
func (c *Controller) readRollouts(ctx context.Context, v *view, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	rollouts, err := c.store.ListRollouts(ctx, v.rt.Name)
	if err != nil {
		return nil, fmt.Errorf("list rollouts of %s: %w", v.rt.Name, err)
	}
	rollout.SortByCreation(rollouts)
	v.rollouts = rollouts
	for i := range rollouts {
		v.endedNow(&rollouts[i])
	}
	v.at = rollout.Adopt(rollouts, string(v.rt.UID), v.at)
	inflight, extra := rollout.InFlight(rollouts, string(v.rt.UID))
	for _, r := range extra {
		if err := c.supersede(ctx, v, r, inflight.Spec.ToDigest, now); err != nil {
			return nil, err
		}
	}
	return inflight, nil
}

// supersedeOrWait applies rollout.Replace to the rollout in flight when the target moved: one
// that has not started a step is superseded (nil is returned: there is none in flight any
// more); one that has is kept and the runtime says the target waits for it.
func (c *Controller) supersedeOrWait(ctx context.Context, v *view, inflight *v1alpha1.RuntimeRollout, t rollout.Target, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	switch action, newer, waiting := rollout.Replace(inflight, t); action {
	case rollout.WaitForInFlight:
		v.in.Waiting = waiting
	case rollout.SupersedeInFlight:
		if err := c.supersede(ctx, v, inflight, newer, now); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return inflight, nil
}

// reuseOrCreate finds, when no rollout is in flight and the target moves (and the active plan
// can be read), the rollout named for the move and does what rollout.ReuseExisting says:
// resume it, keep it as the failure that stalls the runtime, or (after deleting an ended or
// an earlier runtime's one) create it. It returns the rollout in flight.
func (c *Controller) reuseOrCreate(ctx context.Context, v *view, inflight *v1alpha1.RuntimeRollout, t rollout.Target, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	if inflight != nil || !t.Move || v.in.PlanUnreadable != "" {
		return inflight, nil
	}
	name := rollout.Name(v.at.Plan, t.To)
	var existing *v1alpha1.RuntimeRollout
	if i := slices.IndexFunc(v.rollouts, func(r v1alpha1.RuntimeRollout) bool { return r.Name == name }); i >= 0 {
		existing = &v.rollouts[i]
	}
	switch rollout.ReuseExisting(existing, string(v.rt.UID)) {
	case rollout.Resume:
		return existing, nil
	case rollout.KeepFailed:
		v.in.Last = existing
		return nil, nil
	case rollout.ReplaceEarlierRuntime:
		if err := c.store.DeleteRollout(ctx, name, string(existing.UID)); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete rollout %s: %w", name, err)
		}
	case rollout.ReplaceEnded:
		if err := c.store.DeleteRollout(ctx, name, string(existing.UID)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete ended rollout %s: %w", name, err)
		}
	}
	return c.createRollout(ctx, v.rt, v.at.Plan, t.To, t.Reason, now)
}

// createRollout creates the rollout of a move (rollout.New; AlreadyExists is fine: the name
// is the move's) and records it with an Event.
func (c *Controller) createRollout(ctx context.Context, rt *v1alpha1.ClusterRuntime, from, to, reason string, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	r := rollout.New(rt, from, to, reason, now)
	name := r.Name
	out, err := c.store.CreateRollout(ctx, r)
	if apierrors.IsAlreadyExists(err) {
		out, err = c.store.GetRollout(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create rollout %s: %w", name, err)
	}
	created := fmt.Sprintf("rollout %s (%s) from plan %s to %s", name, reason, cmp.Or(from, "(none)"), cmp.Or(to, "(none)"))
	c.event(ctx, rt, corev1Normal, EventRolloutCreated, created)
	c.rolloutEvent(out, rollout.Event{Reason: EventRolloutCreated, Message: created})
	logging.From(ctx).Info().Str(logging.KeyRollout, name).Str(logging.KeyReason, reason).Msg("rollout created")
	return out, nil
}

func (c *Controller) supersede(ctx context.Context, v *view, r *v1alpha1.RuntimeRollout, newer string, now time.Time) error {
	rt := v.rt
	var out *v1alpha1.RuntimeRollout
	var before *v1alpha1.RuntimeRolloutStatus
	done := false
	err := retryConflict(func() error {
		cur, err := c.store.GetRollout(ctx, r.Name)
		if err != nil {
			return err
		}
		before = cur.Status.DeepCopy()
		if !rollout.Supersede(cur, newer, now) {
			return nil
		}
		out, err = c.store.UpdateRolloutStatus(ctx, cur)
		done = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("supersede rollout %s: %w", r.Name, err)
	}
	if done {
		c.recordChanges(ctx, rt, before, out)
		v.endedNow(out)
	}
	return nil
}

// endedNow keeps r for labelEnded when it ended without its outcome label.
func (v *view) endedNow(r *v1alpha1.RuntimeRollout) {
	if r.Status.Outcome != "" && r.Labels[v1alpha1.LabelOutcome] != r.Status.Outcome {
		v.ended = append(v.ended, r)
	}
}

// labelEnded sets the outcome label of every rollout endedNow kept. A failure is returned (the
// runtime is reconciled again, and its next listing finds the rollout unlabelled).
func (c *Controller) labelEnded(ctx context.Context, v *view) error {
	for _, r := range v.ended {
		if err := c.labelOutcome(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// labelOutcome sets the outcome label on an ended rollout (once).
func (c *Controller) labelOutcome(ctx context.Context, r *v1alpha1.RuntimeRollout) error {
	if r.Status.Outcome == "" || r.Labels[v1alpha1.LabelOutcome] == r.Status.Outcome {
		return nil
	}
	err := retryConflict(func() error {
		cur, err := c.store.GetRollout(ctx, r.Name)
		if err != nil {
			return err
		}
		if cur.Labels[v1alpha1.LabelOutcome] == cur.Status.Outcome {
			return nil
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[v1alpha1.LabelOutcome] = cur.Status.Outcome
		_, err = c.store.UpdateRollout(ctx, cur)
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("label outcome of rollout %s: %w", r.Name, err)
	}
	return nil
}
