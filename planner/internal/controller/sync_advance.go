package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// advanceInFlight writes the steps of a new rollout, runs the scheduler on it (which
// publishes the commands of the steps it started, see advanceFrom) and queues the runtime
// again for the rollout's next timeout and for notes still unwritten. When the rollout ends
// it records the end (Event, outcome label, the active plan after a success) and returns nil;
// a rollout that ended without success is kept as v.in.Last.
func (c *Controller) advanceInFlight(ctx context.Context, v *view, inflight *v1alpha1.RuntimeRollout, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	if inflight == nil {
		return nil, nil
	}
	init, err := c.initialize(ctx, v, inflight)
	if err != nil {
		return nil, err
	}
	r, res, err := c.advanceFrom(ctx, v.rt, inflight.Name, inflight, init)
	if err != nil {
		return nil, err
	}
	if res.Ended != "" {
		c.rolloutEnded(ctx, v, r)
		v.endedNow(r)
	}
	if !res.Wake.IsZero() {
		c.queue.AddAfter(v.rt.Name, max(res.Wake.Sub(now), time.Millisecond))
	}
	if kept := c.notes.oldest(r.Name); !kept.IsZero() {
		c.queue.AddAfter(v.rt.Name, max(kept.Add(NoteDelay).Sub(now), time.Millisecond))
	}
	if !r.Status.Phase.Terminal() {
		return r, nil
	}
	if r.Status.Phase != v1alpha1.PhaseSucceeded {
		v.in.Last = r
	}
	return nil, nil
}

// rolloutEnded records a rollout's end: the stack's position after it (rollout.Position.After)
// and a log line (its Events were recorded with the write that ended it, recordChanges).
func (c *Controller) rolloutEnded(ctx context.Context, v *view, r *v1alpha1.RuntimeRollout) {
	v.at = v.at.After(r)
	logging.From(ctx).Info().Str(logging.KeyRollout, r.Name).Str(logging.KeyOutcome, r.Status.Outcome).Msg("rollout ended")
}

// initialize returns what fills a new rollout's steps (nil for a rollout whose steps are
// filled): from what each release holds to the rollout's plan, the active plan, except where a
// rollout since then that did not reach its plan moved a release (rollout.Held); a release such
// a rollout left unsure gets a step whatever it holds. The steps are written by the same status
// write that starts the first of them (advanceFrom), so a new rollout costs one write before
// its first command; a crash before that write leaves the rollout without steps, and the next
// reconcile fills them again (plan.Steps is deterministic).
func (c *Controller) initialize(ctx context.Context, v *view, r *v1alpha1.RuntimeRollout) (func(*v1alpha1.RuntimeRollout), error) {
	if r.Status.Phase != "" {
		return nil, nil
	}
	from, err := c.loadPlan(ctx, r.Spec.FromDigest)
	if err != nil {
		return nil, err
	}
	to, err := c.loadPlan(ctx, r.Spec.ToDigest)
	if err != nil {
		return nil, err
	}
	opts := plan.StepOptions{ApplyAll: r.Spec.Reason == v1alpha1.RolloutReasonEnginePolicyChanged}
	h, err := c.holding(ctx, v.rt, r.Spec.FromDigest, v.rollouts, nil)
	if err != nil {
		return nil, err
	}
	var bundle plan.BundleMeta
	if to != nil {
		bundle = to.Bundle
	}
	held, err := c.heldPlan(ctx, from, bundle, h)
	if err != nil {
		return nil, err
	}
	if held != nil {
		from, opts.Force = held, h.Unsure
	}
	steps := plan.Steps(from, to, opts)
	if steps == nil {
		steps = []v1alpha1.Step{}
	}
	// Each attempt of the write (a conflict reads the rollout again) gets its own copy; one
	// already filled (by an earlier planner) is left as it is.
	return func(cur *v1alpha1.RuntimeRollout) {
		rollout.Initialize(cur, slices.Clone(steps))
	}, nil
}

// env is what the scheduler needs to know about the runtime (rollout.EnvFor), with the last
// engine and credentials reports this planner knows.
func (c *Controller) env(rt *v1alpha1.ClusterRuntime, now time.Time) rollout.Env {
	return rollout.EnvFor(rt, c.knownEngine(rt), c.knownCreds(rt), c.cfg.Identities, now)
}

// advance re-reads the rollout, applies observe (may be nil), runs the scheduler, writes the
// status when it changed (re-reading on a conflict) and publishes every command not yet
// published. It returns the rollout as written.
func (c *Controller) advance(ctx context.Context, rt *v1alpha1.ClusterRuntime, name string, observe func(r *v1alpha1.RuntimeRollout)) (*v1alpha1.RuntimeRollout, rollout.Result, error) {
	return c.advanceFrom(ctx, rt, name, nil, observe)
}

// advanceFrom is advance starting from read, the rollout as the caller just read it under the
// runtime's lock (nil: read it). Only a conflict reads it again: each read of the whole
// rollout is as large as its steps.
//
// Reads come from the informer's cache. A write that succeeds proves the rollout it changed
// was current; when nothing was written and the rollout has commands this process has not
// published (after a restart, or a blocked step's retry), the runtime and the rollout are read
// again from the API server and the commands are published from that view: a command is
// never published from a stale cache.
func (c *Controller) advanceFrom(ctx context.Context, rt *v1alpha1.ClusterRuntime, name string, read *v1alpha1.RuntimeRollout, observe func(r *v1alpha1.RuntimeRollout)) (*v1alpha1.RuntimeRollout, rollout.Result, error) {
	// A verdict or a result writes the rollout anyway and carries every note; a reconcile
	// writes only the notes that waited NoteDelay for such a write.
	var cutoff time.Time
	if observe == nil {
		cutoff = c.cfg.Clock.Now().Add(-NoteDelay)
	}
	notes := c.notes.take(name, cutoff)
	for verified := false; ; verified = true {
		out, res, wrote, err := c.advanceOnce(ctx, rt, name, read, observe, notes)
		if err != nil {
			c.notes.putBack(name, notes)
			return nil, res, fmt.Errorf("advance rollout %s: %w", name, err)
		}
		if !wrote && !verified && c.unpublished(out) {
			c.cache.invalidate(kindRuntime, rt.Name)
			c.cache.invalidate(kindRollout, name)
			if rt, err = c.store.GetRuntime(ctx, rt.Name); err != nil {
				return nil, res, fmt.Errorf("advance rollout %s: read runtime: %w", name, err)
			}
			read = nil
			continue
		}
		if err := c.publishOutstanding(ctx, rt, out); err != nil {
			return out, res, err
		}
		return out, res, nil
	}
}

// advanceOnce applies the notes and observe to the rollout, runs the scheduler and writes the
// status when it changed, re-reading on a conflict. wrote reports a successful write.
func (c *Controller) advanceOnce(ctx context.Context, rt *v1alpha1.ClusterRuntime, name string, read *v1alpha1.RuntimeRollout, observe func(r *v1alpha1.RuntimeRollout), notes map[string]note) (out *v1alpha1.RuntimeRollout, res rollout.Result, wrote bool, err error) {
	err = retryConflict(func() error {
		cur := read
		read = nil
		if cur == nil {
			var err error
			if cur, err = c.store.GetRollout(ctx, name); err != nil {
				return err
			}
		} else {
			cur = cur.DeepCopy()
		}
		orig := cur.Status.DeepCopy()
		now := c.cfg.Clock.Now()
		applyNotes(cur, notes)
		if observe != nil {
			observe(cur)
		}
		res = rollout.Advance(cur, c.env(rt, now))
		if statusEqual(orig, &cur.Status) {
			out = cur
			return nil
		}
		var err error
		if out, err = c.store.UpdateRolloutStatus(ctx, cur); err == nil {
			wrote = true
			c.recordChanges(ctx, rt, orig, out)
		}
		return err
	})
	return out, res, wrote, err
}

// unpublished reports whether the rollout has a command in flight this process has not
// published.
func (c *Controller) unpublished(r *v1alpha1.RuntimeRollout) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range rollout.Outstanding(r, c.cfg.Clock.Now()) {
		if !c.published[rollout.CommandID(v1alpha1.StepID(r.Name, st.Index), st.Attempt, r.UID)] {
			return true
		}
	}
	return false
}

func (c *Controller) publishOutstanding(ctx context.Context, rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) error {
	for _, st := range rollout.Outstanding(r, c.cfg.Clock.Now()) {
		s := rollout.Step(r, st.Index)
		if s == nil {
			continue
		}
		if err := c.publishStep(ctx, rt, r, s, st.Attempt); err != nil {
			return err
		}
	}
	return nil
}

// publishStep publishes a step's command with message ID rollout.CommandID, once per process
// (JetStream drops a republish after a restart within its window).
func (c *Controller) publishStep(ctx context.Context, rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout, s *v1alpha1.Step, attempt string) error {
	stepID := v1alpha1.StepID(r.Name, s.Index)
	id := rollout.CommandID(stepID, attempt, r.UID)
	started := time.Time{}
	if s.StartedAt != nil {
		started = s.StartedAt.UTC()
	}
	// The rollout as held here shows the step started, so its resourceVersion orders the
	// command after every command of an earlier rollout (bus.StepRef.Seq).
	ref := bus.StepRef{Rollout: r.Name, Index: s.Index, ID: stepID, Started: started, RolloutUID: string(r.UID), Seq: r.ResourceVersion}
	if s.Action == v1alpha1.ActionRemove {
		return c.publishOnce(ctx, bus.RemoveSubject(rt.Name, s.Release), id,
			bus.NewRemoveCommand(rt.Name, r.Spec.RuntimeUID, ref, s.Release))
	}
	return c.publishOnce(ctx, bus.ApplySubject(rt.Name, s.Release), id,
		bus.NewApplyCommand(rt.Name, r.Spec.RuntimeUID, ref, s.Release, s.Action, r.Spec.ToDigest, rt.Spec.SuspendEngine, nil))
}

// publishOnce publishes unless this process already did; it reports through the error only.
func (c *Controller) publishOnce(ctx context.Context, subject, id string, m bus.Envelope) error {
	_, err := c.publishNew(ctx, subject, id, m)
	return err
}

func (c *Controller) publishNew(ctx context.Context, subject, id string, m bus.Envelope) (bool, error) {
	c.mu.Lock()
	seen := c.published[id]
	c.mu.Unlock()
	if seen {
		return false, nil
	}
	if err := c.pub.Publish(ctx, subject, id, m); err != nil {
		return false, err
	}
	c.cfg.Metrics.observeAdvance(ctx)
	c.mu.Lock()
	if len(c.published) > 100000 { // bound memory; a republish is harmless
		c.published = map[string]bool{}
	}
	c.published[id] = true
	c.mu.Unlock()
	logging.From(ctx).Debug().Str(logging.KeySubject, subject).Str(logging.KeyMsgID, id).Msg("command published")
	return true, nil
}

// statusEqual is equality.Semantic.DeepEqual of two rollout statuses, its steps compared
// without reflection (rolloutsteps.StepsEqual): a step's handling compares every step.
func statusEqual(a, b *v1alpha1.RuntimeRolloutStatus) bool {
	if !rolloutsteps.StepsEqual(a.Steps, b.Steps) {
		return false
	}
	as, bs := *a, *b
	as.Steps, bs.Steps = nil, nil
	return equality.Semantic.DeepEqual(as, bs)
}
