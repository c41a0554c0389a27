package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// handleVerdict takes readiness's verdict: a ready verdict for the step in flight finishes it
// and, in the same handling, starts every step it unblocked. A verdict no step in flight waits
// for (after the release's rollout, or on a repair) goes to the runtime's release list
// (onHealth), which makes it NotReady while a release of the active plan is not ready.
func (c *Controller) handleVerdict(ctx context.Context, m *dispatch.Message) error {
	var v bus.ReleaseVerdict
	if err := m.Decode(&v); err != nil {
		return err
	}
	awaited := false
	if name, _, ok := v1alpha1.ParseStepID(v.StepID); ok {
		if v.Ready {
			ctx = withVerdictReceived(ctx, time.Now())
		}
		now := c.cfg.Clock.Now()
		observe := func(_ *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) {
			awaited = rollout.AwaitsVerdict(r, &v)
			rollout.ObserveVerdict(r, &v, now)
		}
		noteOnly := func(rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) bool {
			if !rollout.VerdictNoteOnly(r, &v) {
				return false
			}
			awaited = true
			// The note is applied later, by whichever handler or reconcile writes the rollout
			// next, on another goroutine: it must not touch this call's awaited.
			c.notes.add(name, "verdict/"+v.StepID, note{at: now, observe: func(r *v1alpha1.RuntimeRollout) { rollout.ObserveVerdict(r, &v, now) }})
			return true
		}
		if err := c.onRollout(ctx, v.Runtime, name, noteOnly, observe); err != nil {
			return err
		}
	}
	return c.onHealth(ctx, &v, awaited)
}

// handleResult takes the applier's answer to a command.
func (c *Controller) handleResult(ctx context.Context, m *dispatch.Message) error {
	var res bus.ApplyResult
	if err := m.Decode(&res); err != nil {
		return err
	}
	c.overridden(ctx, &res)
	name, _, ok := v1alpha1.ParseStepID(res.Step.ID)
	if !ok {
		switch {
		case res.Outcome == bus.OutcomeForeign || res.Outcome == bus.OutcomeBlocked || res.Outcome == bus.OutcomeFailed:
			c.repairRefused(ctx, &res)
		case res.Outcome == bus.OutcomeWritten && driftRepair(res.Step.ID):
			c.repaired(ctx, &res)
		case res.Outcome == bus.OutcomeOutdated:
			// Decided from an Application that is not there any more: decide again from the
			// one that is (its change queued a check too; this one costs a cache read).
			c.checkRelease(res.Runtime, res.Release)
		}
		return nil
	}
	now := c.cfg.Clock.Now()
	observe := func(rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) {
		rollout.ObserveResult(r, &res, rollout.ValidationDisabled(rt), now)
	}
	noteOnly := func(rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) bool {
		if !rollout.NoteOnly(r, &res, rollout.ValidationDisabled(rt)) {
			return false
		}
		c.notes.add(name, "result/"+res.Step.ID, note{at: now, observe: func(r *v1alpha1.RuntimeRollout) { observe(rt, r) }})
		return true
	}
	return c.onRollout(ctx, res.Runtime, name, noteOnly, observe)
}

func (c *Controller) repairRefused(ctx context.Context, res *bus.ApplyResult) {
	unlock := c.locks.lock(res.Runtime)
	defer unlock()
	rt, err := c.store.GetRuntime(ctx, res.Runtime)
	if err != nil {
		return
	}
	c.event(ctx, rt, corev1Warning, cmp.Or(res.Reason, res.Outcome), fmt.Sprintf("repair of %s refused (%s): %s", res.Release, res.Outcome, res.Message))
}

// repaired records that the applier wrote an edited Application back to its plan.
func (c *Controller) repaired(ctx context.Context, res *bus.ApplyResult) {
	rt, err := c.store.GetRuntime(ctx, res.Runtime)
	if err != nil {
		return
	}
	c.event(ctx, rt, corev1Normal, rollout.EventDriftRepaired, fmt.Sprintf("Application %s was written back to its plan (%s)", res.Release, res.Step.ID))
}

// onRollout runs observe on a rollout of runtime under the runtime's lock, advances it,
// publishes what started, and queues the runtime for a status update. When noteOnly (may be
// nil) reports that it kept the message as a note, nothing is written now: the next write of
// the rollout (the step's verdict, or the runtime's reconcile) carries the note.
func (c *Controller) onRollout(ctx context.Context, runtime, name string, noteOnly func(rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout) bool, observe func(rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout)) error {
	unlock := c.locks.lock(runtime)
	defer unlock()
	ctx = logging.Into(ctx, logging.From(ctx).With().Str(logging.KeyRuntime, runtime).Str(logging.KeyRollout, name).Logger())
	rt, err := c.store.GetRuntime(ctx, runtime)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runtime %s: %w", runtime, err)
	}
	r, err := c.store.GetRollout(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil // deleted: nothing to record
	}
	if err != nil {
		return fmt.Errorf("get rollout %s: %w", name, err)
	}
	if r.Spec.Runtime != runtime || r.Status.Phase.Terminal() || r.Status.Phase == "" {
		return nil
	}
	if noteOnly != nil && noteOnly(rt, r) {
		c.queue.AddAfter(runtime, NoteDelay)
		return nil
	}
	_, res, err := c.advanceFrom(ctx, rt, name, r, func(r *v1alpha1.RuntimeRollout) { observe(rt, r) })
	if err != nil {
		return err
	}
	if res.Ended != "" {
		// The rollout ended: the runtime's Ready condition and active plan change now, not
		// after the coalescing delay meant for the steps in between.
		c.queue.Add(runtime)
		return nil
	}
	c.queue.AddAfter(runtime, StatusCoalesce)
	return nil
}

// handleDrift takes readiness's drift news. With the level-triggered loop running (an
// Application informer: Config.Applications) a report is a hint: it queues a check of the
// release, which decides from the live Application and what the release must be, so a report
// lost, repeated or out of order changes nothing. Without it the report's content decides, as
// a check would (decideDrift).
func (c *Controller) handleDrift(ctx context.Context, m *dispatch.Message) error {
	var d bus.DriftReport
	if err := m.Decode(&d); err != nil {
		return err
	}
	if c.drift != nil {
		c.checkRelease(d.Runtime, d.Release)
		return nil
	}
	unlock := c.locks.lock(d.Runtime)
	defer unlock()
	ctx = logging.Into(ctx, logging.From(ctx).With().Str(logging.KeyRuntime, d.Runtime).Logger())
	rt, err := c.store.GetRuntime(ctx, d.Runtime)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runtime %s: %w", d.Runtime, err)
	}
	if rt.DeletionTimestamp != nil {
		return nil // the stack is being removed or left: nothing to repair
	}
	tag := d.ResourceVersion
	if tag == "" {
		sum := sha256.Sum256([]byte(m.ID))
		tag = hex.EncodeToString(sum[:6])
	}
	rollouts, err := c.store.ListRollouts(ctx, d.Runtime)
	if err != nil {
		return fmt.Errorf("list rollouts of %s: %w", d.Runtime, err)
	}
	inflight := inFlightOf(rt, rollouts)
	// Forced back to the plan it was last written from: never to the active plan's chart and
	// values over a release a rollout that did not reach its plan had moved.
	h, err := c.holding(ctx, rt, rt.Status.ActivePlan, rollouts, nil)
	if err != nil {
		return err
	}
	_, err = c.decideDrift(ctx, rt, rollouts, inflight, &d, h.Digests[d.Release], observation{tag: tag})
	return err
}

// decideDrift acts on the drift of one release, observed (tag names the observation): with no
// rollout in flight its fields are forced back from digest, the plan it must be at (none: not
// part of the stack); during a rollout, rollout.ObserveDrift decides. It returns the rollout in
// flight as it is now. The caller holds the runtime's lock.
func (c *Controller) decideDrift(ctx context.Context, rt *v1alpha1.ClusterRuntime, rollouts []v1alpha1.RuntimeRollout, inflight *v1alpha1.RuntimeRollout, d *bus.DriftReport, digest string, seen observation) (*v1alpha1.RuntimeRollout, error) {
	ctx = logging.Into(ctx, logging.From(ctx).With().Str(logging.KeyRelease, d.Release).Logger())
	if rt.Spec.SuspendEngine {
		d.Kinds = slices.DeleteFunc(slices.Clone(d.Kinds), func(k string) bool { return k == bus.DriftAutoSyncDisabled })
	}
	if inflight == nil {
		if len(d.Kinds) == 0 || digest == "" {
			return nil, nil
		}
		return nil, c.repair(ctx, rt, d, digest, seen)
	}
	var dec rollout.DriftDecision
	now := c.cfg.Clock.Now()
	r, _, err := c.advance(ctx, rt, inflight.Name, func(r *v1alpha1.RuntimeRollout) {
		dec = rollout.ObserveDrift(r, d, now)
	})
	if err != nil {
		return inflight, err
	}
	switch dec.Action {
	case rollout.DriftRepair:
		repairFrom := dec.RepairDigest
		if repairFrom == "" { // a release with no step in this rollout: the plan it holds
			h, err := c.holding(ctx, rt, r.Spec.FromDigest, rollouts, r)
			if err != nil {
				return r, err
			}
			repairFrom = h.Digests[d.Release]
		}
		if repairFrom != "" {
			if err := c.repair(ctx, rt, d, repairFrom, seen); err != nil {
				return r, err
			}
		}
	case rollout.DriftRepublish:
		if s := rollout.StepFor(r, d.Release); s != nil && (s.State == v1alpha1.StepInProgress || s.State == v1alpha1.StepBlocked) && !c.repeated(rt.Name, d, r.Spec.ToDigest) {
			attempt := "drift-" + seen.tag
			reason, msg := v1alpha1.EventFieldOwnershipOverridden, fmt.Sprintf("%s was edited (%v) during its step; its fields are forced back", d.Release, d.Kinds)
			if slices.Contains(d.Kinds, bus.DriftDeleted) {
				reason, msg = EventApplicationRewritten, fmt.Sprintf("Application %s was deleted during its step; the step writes it again (its resources were kept)", d.Release)
			}
			// Recorded once the applier's write succeeded (overridden), not now: it may refuse.
			c.expectOverride(rollout.CommandID(v1alpha1.StepID(r.Name, s.Index), attempt, r.UID), override{reason: reason, msg: msg, rollout: r.Name})
			if err := c.publishStep(ctx, rt, r, s, attempt); err != nil {
				return r, err
			}
		}
	}
	c.queue.Add(rt.Name)
	return r, nil
}

// repair forces a release's Application back to the plan it was written from. The Event that
// says so (FieldOwnershipOverridden, or ApplicationRewritten for a deleted one) is recorded
// when the applier reports the write done (overridden), not when the command goes out: the
// applier may refuse it (a foreign Application, the resources finalizer).
func (c *Controller) repair(ctx context.Context, rt *v1alpha1.ClusterRuntime, d *bus.DriftReport, digest string, seen observation) error {
	if c.repeated(rt.Name, d, digest) {
		logging.From(ctx).Debug().Strs("kinds", d.Kinds).Strs("fields", d.Fields).Msg("the same drift survived the last write; forced back again at the next resync")
		return nil
	}
	stepID := repairID(digest, seen.tag)
	base := stepID + "/" + d.Release
	id := base
	c.mu.Lock()
	if n := c.refusals[base]; n > 0 { // refused before: a new message, or the bus would drop it
		id = base + "/" + strconv.Itoa(n)
	}
	c.mu.Unlock()
	reason, msg := v1alpha1.EventFieldOwnershipOverridden, fmt.Sprintf("Application %s was edited (%v; fields %v; managers %v); its fields are forced back", d.Release, d.Kinds, d.Fields, d.Managers)
	if slices.Contains(d.Kinds, bus.DriftDeleted) {
		reason, msg = EventApplicationRewritten, fmt.Sprintf("Application %s was deleted outside a Remove step; it is written again (its resources were kept)", d.Release)
	}
	c.expectOverride(id, override{reason: reason, msg: msg, repair: base, key: rt.Name + "/" + d.Release})
	cmd := bus.NewApplyCommand(rt.Name, string(rt.UID), bus.StepRef{ID: stepID, Started: c.cfg.Clock.Now().UTC()},
		d.Release, v1alpha1.ActionApply, digest, rt.Spec.SuspendEngine, seen.basis) // refused once the Application is not the one seen
	fresh, err := c.publishNew(ctx, bus.ApplySubject(rt.Name, d.Release), id, cmd)
	if err != nil {
		return err
	}
	if fresh {
		logging.From(ctx).Info().Str(logging.KeyStep, stepID).Strs("kinds", d.Kinds).Strs("fields", d.Fields).Msg("drift found; forcing it back")
	}
	return nil
}

// repeated reports whether the same drift of a release (kinds, fields, managers, the plan it is
// forced back from) was forced back less than a resync ago and no check has seen the release
// as its plan says since, and records it otherwise. Each write of the operator's is a new
// version of the Application, and so a new observation: a drift the write cannot undo (a field
// it does not remove) would be forced back again at once, write after write. Such a drift is
// forced back once a resync instead. An edit made again the same way after a check saw its
// repair land (forgetRepair) is new drift, forced back at once.
func (c *Controller) repeated(runtime string, d *bus.DriftReport, digest string) bool {
	key := runtime + "/" + d.Release
	sig := digest + "\x00" + strings.Join(d.Kinds, ",") + "\x00" + strings.Join(d.Fields, ",") + "\x00" + strings.Join(d.Managers, ",")
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.lastRepair[key]; ok && last.sig == sig && now.Sub(last.at) < c.cfg.DriftResync {
		return true
	}
	if len(c.lastRepair) > 10000 {
		c.lastRepair = map[string]lastRepair{}
	}
	c.lastRepair[key] = lastRepair{sig: sig, at: now}
	return false
}

// forgetRepair drops the record of the last drift forced back of a release: a check saw the
// release as its plan says, so the repair landed (or the edit was undone), and the same edit
// made again is new drift, not the write's leftover.
func (c *Controller) forgetRepair(runtime, release string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastRepair, runtime+"/"+release)
}

// lastRepair is the last drift forced back of a release, and when.
type lastRepair struct {
	sig string
	at  time.Time
}

// EventApplicationRewritten is the Event of an owned Application written again after it was
// deleted outside a Remove step.
const EventApplicationRewritten = "ApplicationRewritten"

// override is an Event kept until the applier reports the write that forces drift back.
type override struct {
	reason, msg string
	// rollout, for a step's command published again, is the rollout the Event also goes to.
	rollout string
	// repair, for a repair, is its message ID without the retry; key is runtime/release.
	repair, key string
}

// expectOverride keeps the Event of a write that forces drift back, by the command's message
// ID, until the applier answers it (overridden). Bounded: a planner that restarts, or an
// answer that never comes, loses only the Event.
func (c *Controller) expectOverride(commandID string, o override) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.overrides) > 10000 {
		c.overrides = map[string]override{}
	}
	if len(c.refusals) > 10000 {
		c.refusals = map[string]int{}
	}
	c.overrides[commandID] = o
}

// overridden takes the Event kept for a command the applier answered: recorded when its write
// succeeded (Written, Refreshed, SyncStarted), dropped when it refused.
func (c *Controller) overridden(ctx context.Context, res *bus.ApplyResult) {
	c.mu.Lock()
	o, ok := c.overrides[res.CommandID]
	delete(c.overrides, res.CommandID)
	c.mu.Unlock()
	if !ok {
		return
	}
	if !writeDone(res.Outcome) {
		if o.repair != "" {
			// Refused: the next check (the next change, or the resync) tries again at once,
			// under a new message ID.
			c.mu.Lock()
			c.refusals[o.repair]++
			delete(c.lastRepair, o.key)
			c.mu.Unlock()
		}
		return
	}
	rt, err := c.store.GetRuntime(ctx, res.Runtime)
	if err != nil {
		return
	}
	typ := corev1Warning
	if o.rollout != "" {
		typ = corev1Normal
		if r, err := c.store.GetRollout(ctx, o.rollout); err == nil {
			c.rolloutEvent(r, rollout.Event{Reason: o.reason, Message: o.msg})
		}
	}
	c.event(ctx, rt, typ, o.reason, o.msg)
}

// writeDone reports whether an applier's outcome means its write of the Application succeeded.
func writeDone(outcome string) bool {
	return outcome == bus.OutcomeWritten || outcome == bus.OutcomeRefreshed || outcome == bus.OutcomeSyncStarted
}

// handleEngine takes readiness's news on Argo CD and re-evaluates every runtime. A report
// older than the one held (a redelivery after Restore, or two handled out of order by the
// dispatcher's workers) is acknowledged and dropped. Older means earlier in the stream: the
// senders' clocks may disagree (a new readiness leader on another node).
func (c *Controller) handleEngine(ctx context.Context, m *dispatch.Message) error {
	var e bus.EngineStatus
	if err := m.Decode(&e); err != nil {
		return err
	}
	c.mu.Lock()
	stale := older(m, c.engineSeq)
	if !stale {
		c.engine, c.engineSeq = &e, max(c.engineSeq, m.Sequence)
	}
	c.mu.Unlock()
	if !stale {
		c.enqueueAll()
	}
	return nil
}

// handleCredentials takes the credential refresher's news and re-evaluates every runtime; an
// older report than the one held is dropped, as in handleEngine.
func (c *Controller) handleCredentials(ctx context.Context, m *dispatch.Message) error {
	var cs bus.CredentialsStatus
	if err := m.Decode(&cs); err != nil {
		return err
	}
	c.mu.Lock()
	stale := older(m, c.credsSeq)
	if !stale {
		c.creds, c.credsSeq = &cs, max(c.credsSeq, m.Sequence)
	}
	c.mu.Unlock()
	if stale {
		return nil
	}
	c.retryPullsNow() // a renewed token may be what a failed pull needed
	c.enqueueAll()
	return nil
}

// older reports whether m came before the report held, which was the stream's message held
// (0: none, or its sequence unknown). A message of unknown sequence is never older.
func older(m *dispatch.Message, held uint64) bool {
	return m.Sequence != 0 && m.Sequence < held
}

// ReportSubjects are the subjects whose newest message is the current state of something the
// planner holds in memory: Argo CD's, and the registry credentials'.
var ReportSubjects = []string{bus.SubjectEngine, bus.SubjectCredentials}

// Restore hands the controller the newest report on each of ReportSubjects, as last finds it
// on the bus (nil when there is none), before the dispatcher starts. The planner's durable
// consumer acknowledged these before a restart, and readiness repeats its report only every
// few minutes: without them a runtime with no EngineAvailable recorded (one created after
// the restart) would hold its steps until then. A report last cannot read is logged and left
// to the next one.
func (c *Controller) Restore(ctx context.Context, last func(ctx context.Context, subject string) (*dispatch.Message, error)) {
	log := logging.From(ctx)
	routes := c.Routes()
	for _, subject := range ReportSubjects {
		m, err := last(ctx, subject)
		if err != nil {
			log.Warn().Err(err).Str(logging.KeySubject, subject).Msg("read the newest report; waiting for the next one")
			continue
		}
		if m == nil {
			continue
		}
		h, ok := routes[m.Type]
		if !ok {
			continue
		}
		if err := h(ctx, m); err != nil {
			log.Warn().Err(err).Str(logging.KeySubject, subject).Str(logging.KeyMsgID, m.ID).Msg("restore the newest report; waiting for the next one")
			continue
		}
		log.Info().Str(logging.KeySubject, subject).Str(logging.KeyMsgID, m.ID).Msg("restored the newest report")
	}
}
