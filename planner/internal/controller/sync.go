package controller

import (
	"cmp"
	"context"
	"fmt"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// view is what one reconcile of a runtime learned, phase by phase; it feeds the runtime's
// status.
type view struct {
	rt       *v1alpha1.ClusterRuntime
	deleting bool
	// at is where the stack is: the recorded active plan and engine policy, moved by an
	// adopted or a just-ended successful rollout.
	at rollout.Position
	// rollouts are the runtime's rollouts as listed, oldest first.
	rollouts []v1alpha1.RuntimeRollout
	// ended are ended rollouts that do not carry their outcome label yet (labelEnded).
	ended []*v1alpha1.RuntimeRollout
	in    status.Inputs
}

// Sync reconciles one runtime, in phases a reader can follow top to bottom; each is a method in
// the file its phase names (sync_*.go), and every decision in them is a call into package
// rollout, status or plan:
//
//  1. readRuntime (sync_runtime.go): the runtime, and its finalizer set to match its deletion
//     policy;
//  2. readRollouts (sync_rollouts.go): its rollouts, ended ones labelled with their outcome, a
//     success the runtime's status missed adopted, the rollout in flight found (extra ones
//     superseded);
//  3. readPlans (sync_plans.go): the plan the spec resolves to (stored as a ConfigMap) and the
//     active plan;
//  4. choose the target (rollout.ChooseTarget): the desired plan, a policy move, the
//     runtime's removal, or releasing the finalizer of a runtime being deleted;
//  5. supersedeOrWait (sync_rollouts.go): the rollout in flight, if it goes elsewhere, is
//     superseded or waited for;
//  6. reuseOrCreate (sync_rollouts.go): with none in flight, the rollout of the move is
//     resumed, kept as a failure, or created;
//  7. advanceInFlight (sync_advance.go): its steps are initialized and advanced, and the
//     commands of started steps published; its end moves the active plan;
//  8. an ended rollout that did not reach its plan keeps the runtime stalled
//     (rollout.KeepsStalled); a runtime being deleted whose releases are all removed releases
//     its finalizer (rollout.Removed);
//  9. engineSuspension (sync_engine.go): every owned Application written with automated sync
//     off or on;
//  10. writeRuntimeStatus (sync_status.go): the runtime's status and conditions, with an Event
//     per transition;
//  11. labelEnded (sync_rollouts.go): ended rollouts get their outcome label, after the
//     runtime's status so that the label (a convenience for selectors) does not delay the
//     runtime's Ready;
//  12. prune: ended rollouts beyond spec.rollout.historyLimit, and plans nothing refers to any
//     more, are deleted (retention.go).
//
// Runtimes are reconciled one at a time each (keyed locks, locks.go); observations waiting for
// a write of their rollout are notes (notes.go).
//
// It is idempotent: running it twice in a row publishes and writes nothing the second time.
func (c *Controller) Sync(ctx context.Context, name string) error {
	unlock := c.locks.lock(name)
	defer unlock()
	ctx = logging.Into(ctx, logging.From(ctx).With().Str(logging.KeyRuntime, name).Logger())

	v, err := c.readRuntime(ctx, name)
	if v == nil || err != nil {
		return err
	}
	err = c.syncRuntime(ctx, v)
	// Labelled whatever the phases did: a rollout that ended stays ended.
	if lerr := c.labelEnded(ctx, v); err == nil {
		err = lerr
	}
	if err == nil {
		err = c.prune(ctx, v)
	}
	return err
}

// syncRuntime runs phases 2 to 10 of Sync.
func (c *Controller) syncRuntime(ctx context.Context, v *view) error {
	now := c.cfg.Clock.Now()
	inflight, err := c.readRollouts(ctx, v, now)
	if err != nil {
		return err
	}
	desired, active, err := c.readPlans(ctx, v, now)
	if err != nil {
		return err
	}
	target := rollout.ChooseTarget(rollout.TargetInputs{
		Deleting: v.deleting, DeletionPolicy: v.rt.Spec.DeletionPolicy, At: v.at, Desired: digestOf(desired), InFlight: inflight,
	})
	if target.ReleaseFinalizer {
		return c.releaseFinalizer(ctx, v.rt, fmt.Sprintf("deletionPolicy %s: the stack is left in place", cmp.Or(v.rt.Spec.DeletionPolicy, v1alpha1.DeletionPolicyRetain)))
	}
	if inflight, err = c.supersedeOrWait(ctx, v, inflight, target, now); err != nil {
		return err
	}
	if inflight, err = c.reuseOrCreate(ctx, v, inflight, target, now); err != nil {
		return err
	}
	if inflight, err = c.advanceInFlight(ctx, v, inflight, now); err != nil {
		return err
	}
	v.in.InFlight = inflight
	if v.in.Last != nil && !rollout.KeepsStalled(v.in.Last, v.at) {
		v.in.Last = nil
	}
	if v.deleting && rollout.Removed(inflight, v.in.Last, v.at) {
		return c.releaseFinalizer(ctx, v.rt, "every release was removed")
	}
	if err := c.engineSuspension(ctx, v, active, inflight); err != nil {
		return err
	}
	return c.writeRuntimeStatus(ctx, v, now)
}
