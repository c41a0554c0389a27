package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
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

// Sync reconciles one runtime, in phases a reader can follow top to bottom; each is a method
// below, and every decision in them is a call into package rollout, status or plan:
//
//  1. readRuntime: the runtime, and its finalizer set to match its deletion policy;
//  2. readRollouts: its rollouts, ended ones labelled with their outcome, a success the
//     runtime's status missed adopted, the rollout in flight found (extra ones superseded);
//  3. readPlans: the plan the spec resolves to (stored as a ConfigMap) and the active plan;
//  4. choose the target (rollout.ChooseTarget): the desired plan, a policy move, the
//     runtime's removal, or releasing the finalizer of a runtime being deleted;
//  5. supersedeOrWait: the rollout in flight, if it goes elsewhere, is superseded or waited for;
//  6. reuseOrCreate: with none in flight, the rollout of the move is resumed, kept as a
//     failure, or created;
//  7. advanceInFlight: its steps are initialized and advanced, and the commands of started
//     steps published; its end moves the active plan;
//  8. an ended rollout that did not reach its plan keeps the runtime stalled
//     (rollout.KeepsStalled); a runtime being deleted whose releases are all removed releases
//     its finalizer (rollout.Removed);
//  9. engineSuspension: every owned Application written with automated sync off or on;
//  10. writeRuntimeStatus: the runtime's status and conditions, with an Event per transition;
//  11. labelEnded: ended rollouts get their outcome label, after the runtime's status so that
//     the label (a convenience for selectors) does not delay the runtime's Ready;
//  12. prune: ended rollouts beyond spec.rollout.historyLimit, and plans nothing refers to any
//     more, are deleted (retention.go).
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

// readRuntime reads the runtime and adds or removes the planner's finalizer to match its
// deletion policy (rollout.WantsFinalizer; left alone once deletion began). It returns nil
// when there is nothing to reconcile: the runtime is gone (its cached resolution is
// forgotten), or it is being deleted without the finalizer.
func (c *Controller) readRuntime(ctx context.Context, name string) (*view, error) {
	rt, err := c.store.GetRuntime(ctx, name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.resolved, name)
		c.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get runtime %s: %w", name, err)
	}
	deleting := rt.DeletionTimestamp != nil
	hasFinalizer := slices.Contains(rt.Finalizers, v1alpha1.RuntimeFinalizer)
	if want := rollout.WantsFinalizer(rt); !deleting && want != hasFinalizer {
		if rt, err = c.setFinalizer(ctx, rt, want); err != nil {
			return nil, err
		}
		hasFinalizer = want
	}
	if deleting && !hasFinalizer {
		return nil, nil
	}
	if rt, err = c.retryParked(ctx, rt); err != nil {
		return nil, err
	}
	return &view{
		rt: rt, deleting: deleting,
		at: rollout.Position{Plan: rt.Status.ActivePlan, EnginePolicy: rt.Status.EnginePolicy},
		in: status.Inputs{Runtime: rt, Engine: c.knownEngine(rt), Credentials: c.knownCreds(rt), Parked: c.knownParked()},
	}, nil
}

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

// readPlans returns the plan the spec resolves to (nil while deleting or when it does not
// resolve; the reason is recorded in v), stored as its ConfigMap, and the active plan (nil
// when there is none; when it cannot be read, v records PlanUnreadable and no rollout
// starts).
func (c *Controller) readPlans(ctx context.Context, v *view, now time.Time) (desired, active *plan.Plan, err error) {
	if !v.deleting {
		if desired = c.resolve(ctx, v, now); desired != nil {
			v.in.DesiredDigest = desired.Digest()
			if desired, err = c.storePlan(ctx, v, desired); err != nil {
				return nil, nil, err
			}
		}
	}
	if v.at.Plan != "" {
		if active, err = c.loadPlan(ctx, v.at.Plan); err != nil {
			v.in.PlanUnreadable = fmt.Sprintf("the active plan %s cannot be read (%v); no rollout starts until it is restored or the spec changes", v.at.Plan, err)
			logging.From(ctx).Warn().Err(err).Str(logging.KeyPlanDigest, v.at.Plan).Msg("read active plan")
		}
	}
	return desired, active, nil
}

func digestOf(p *plan.Plan) string {
	if p == nil {
		return ""
	}
	return p.Digest()
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

// releaseFinalizer lets a runtime being deleted go, with an Event saying why.
func (c *Controller) releaseFinalizer(ctx context.Context, rt *v1alpha1.ClusterRuntime, why string) error {
	c.event(ctx, rt, corev1Normal, EventFinalizerReleased, why)
	_, err := c.setFinalizer(ctx, rt, false)
	return err
}

func (c *Controller) setFinalizer(ctx context.Context, rt *v1alpha1.ClusterRuntime, add bool) (*v1alpha1.ClusterRuntime, error) {
	cur := rt
	err := retryConflict(func() error {
		fin := slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == v1alpha1.RuntimeFinalizer })
		if add {
			fin = append(fin, v1alpha1.RuntimeFinalizer)
		}
		if slices.Equal(fin, cur.Finalizers) {
			return nil
		}
		next := cur.DeepCopy()
		next.Finalizers = fin
		out, err := c.store.UpdateRuntime(ctx, next)
		if apierrors.IsConflict(err) {
			if fresh, gerr := c.store.GetRuntime(ctx, rt.Name); gerr == nil {
				cur = fresh
			}
			return err
		}
		if err == nil {
			cur = out
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return cur, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update finalizer of %s: %w", rt.Name, err)
	}
	return cur, nil
}

// resolve returns the plan the spec resolves to, or nil with the failure recorded in v.
func (c *Controller) resolve(ctx context.Context, v *view, now time.Time) *plan.Plan {
	rt := v.rt
	if rt.Spec.Bundle.OCI != nil {
		return c.resolveOCI(ctx, v, now)
	}
	src := rt.Spec.Bundle.ConfigMap
	fail := func(reason, msg string) *plan.Plan {
		v.in.ResolveReason, v.in.ResolveMessage = reason, msg
		return nil
	}
	if src == nil {
		return fail(v1alpha1.ReasonBundleInvalid, "spec.bundle: set configMap (name, and optionally namespace and key) to the bundle's ConfigMap, or oci (repository and digest) to a bundle pushed with kubectl aicr bundle push")
	}
	ns, key := src.Location(c.cfg.Namespace)
	cm, err := c.store.GetConfigMap(ctx, ns, src.Name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fail(v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap: ConfigMap %s/%s does not exist; create it with the bundle under key %s", ns, src.Name, key))
		}
		if apierrors.IsForbidden(err) {
			return fail(v1alpha1.ReasonUnauthorized, fmt.Sprintf("spec.bundle.configMap: the planner may not read ConfigMap %s/%s", ns, src.Name))
		}
		return fail(v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap: read ConfigMap %s/%s: %v", ns, src.Name, err))
	}
	rkey := fmt.Sprintf("%d/%s/%s/%s", rt.Generation, cm.UID, cm.ResourceVersion, key)
	if cached, ok := c.cachedResolution(rt.Name, rkey, now); ok {
		v.in.ResolveReason, v.in.ResolveMessage = cached.reason, cached.msg
		return cached.plan
	}
	done := c.sayResolving(ctx, rt.Name)
	defer done()
	res := resolution{key: rkey}
	data, found := cm.Data[key]
	switch {
	case !found:
		res.reason, res.msg = v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap.key: ConfigMap %s/%s has no key %q", ns, src.Name, key)
	default:
		res.plan, res.reason, res.msg = c.planOf(rt, []byte(data))
	}
	return c.recordResolution(v, res)
}

// OCIRetry is how long after a failed pull of spec.bundle.oci the planner pulls again (the
// artifact may be pushed, the credentials fixed or the registry back meanwhile); a credentials
// report from the refresher retries at once.
const OCIRetry = 30 * time.Second

// resolveOCI pulls the bundle spec.bundle.oci names (Config.Bundles) and resolves it. A plan,
// or a bundle that does not resolve, is kept for the runtime's generation (the digest pins the
// content); a failed pull is tried again after OCIRetry, without saying Resolving again.
func (c *Controller) resolveOCI(ctx context.Context, v *view, now time.Time) *plan.Plan {
	rt := v.rt
	src := rt.Spec.Bundle.OCI
	rkey := fmt.Sprintf("%d/oci/%s@%s", rt.Generation, src.Repository, src.Digest)
	cached, ok := c.cachedResolution(rt.Name, rkey, now)
	if ok {
		v.in.ResolveReason, v.in.ResolveMessage = cached.reason, cached.msg
		return cached.plan
	}
	if cached.key != rkey {
		done := c.sayResolving(ctx, rt.Name)
		defer done()
	}
	res := resolution{key: rkey}
	if c.cfg.Bundles == nil {
		res.reason, res.msg = v1alpha1.ReasonBundleUnavailable, "spec.bundle.oci: this planner reads no OCI bundles (no puller configured); use spec.bundle.configMap"
		return c.recordResolution(v, res)
	}
	pctx, cancel := context.WithTimeout(ctx, OCIPullTimeout)
	data, err := c.cfg.Bundles.Pull(pctx, src)
	cancel()
	if err != nil {
		res.reason, res.msg = plan.ReasonOf(err), err.Error()
		res.retryAt = now.Add(OCIRetry)
		c.queue.AddAfter(rt.Name, OCIRetry)
		logging.From(ctx).Warn().Str(logging.KeyReason, res.reason).Msg("pull of the OCI bundle failed; tried again later")
		return c.recordResolution(v, res)
	}
	res.plan, res.reason, res.msg = c.planOf(rt, data)
	return c.recordResolution(v, res)
}

// OCIPullTimeout bounds one pull of an OCI bundle (it runs under the runtime's lock).
const OCIPullTimeout = time.Minute

// cachedResolution returns the runtime's last resolution, and whether it answers for key now
// (a failed pull stops answering at its retry time).
func (c *Controller) cachedResolution(name, key string, now time.Time) (resolution, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, ok := c.resolved[name]
	return cached, ok && cached.key == key && (cached.retryAt.IsZero() || now.Before(cached.retryAt))
}

// retryPullsNow makes failed pulls due at once (the credentials may have changed).
func (c *Controller) retryPullsNow() {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, res := range c.resolved {
		if !res.retryAt.IsZero() && now.Before(res.retryAt) {
			res.retryAt = now
			c.resolved[name] = res
		}
	}
}

// ResolvingAfter is how long the resolution of a new input (a large bundle, a registry pull)
// runs before the runtime says Resolved=False/Resolving. A faster one is never reported as in
// progress: nobody would see the condition, and its write would stand between a bundle change
// and the rollout's first command.
const ResolvingAfter = 250 * time.Millisecond

// sayResolving writes Resolving once the resolution starting now has run for ResolvingAfter.
// Call done when it ends: it stops the timer and waits for a write already started, so the
// Resolving condition never lands after what the reconcile writes next.
func (c *Controller) sayResolving(ctx context.Context, runtime string) (done func()) {
	stop, finished := make(chan struct{}), make(chan struct{})
	timer := c.cfg.Clock.NewTimer(ResolvingAfter)
	go func() {
		defer close(finished)
		select {
		case <-stop:
			timer.Stop()
		case <-timer.C():
			now := c.cfg.Clock.Now()
			_ = c.patchStatus(ctx, runtime, func(st *v1alpha1.ClusterRuntimeStatus, gen int64) {
				status.Apply(st, []metav1.Condition{{Type: v1alpha1.ConditionResolved, Status: metav1.ConditionFalse,
					Reason: v1alpha1.ReasonResolving, Message: "computing the plan", ObservedGeneration: gen}}, now)
			})
		}
	}()
	return func() {
		close(stop)
		<-finished
	}
}

// planOf parses a bundle document and resolves it with the runtime's overrides and placement.
func (c *Controller) planOf(rt *v1alpha1.ClusterRuntime, data []byte) (*plan.Plan, string, string) {
	b, err := plan.ParseBundle(data)
	if err != nil {
		return nil, plan.ReasonOf(err), err.Error()
	}
	p, err := plan.Resolve(b, plan.Inputs{
		Overrides: rt.Spec.Overrides, Placement: rt.Spec.Placement,
		ForbiddenNamespaces: []string{c.cfg.Namespace, c.cfg.EngineNamespace},
	})
	if err == nil {
		// A plan that cannot be stored does not resolve: it must never become a target.
		err = p.CheckSize()
	}
	if err != nil {
		return nil, plan.ReasonOf(err), err.Error()
	}
	return p, "", ""
}

func (c *Controller) recordResolution(v *view, res resolution) *plan.Plan {
	c.mu.Lock()
	c.resolved[v.rt.Name] = res
	c.mu.Unlock()
	v.in.ResolveReason, v.in.ResolveMessage = res.reason, res.msg
	return res.plan
}

// storePlan stores p as its ConfigMap and returns it; a plan that cannot be stored (too large:
// resolve refuses such a plan already) is recorded as not resolving and nil is returned, so
// it never becomes a rollout's target.
func (c *Controller) storePlan(ctx context.Context, v *view, p *plan.Plan) (*plan.Plan, error) {
	if _, known := c.plans.Cached(p.Digest()); known {
		return p, nil
	}
	cm, err := p.ConfigMap(c.cfg.Namespace)
	if err != nil {
		v.in.ResolveReason, v.in.ResolveMessage = plan.ReasonOf(err), err.Error()
		v.in.DesiredDigest = ""
		return nil, nil
	}
	if err := c.store.CreateConfigMap(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("store plan %s: %w", p.Digest(), err)
	}
	if err := c.plans.Add(p); err != nil {
		return nil, err
	}
	return p, nil
}

// loadPlan returns the plan with digest (nil for ""), from the plan cache.
func (c *Controller) loadPlan(ctx context.Context, digest string) (*plan.Plan, error) {
	if digest == "" {
		return nil, nil
	}
	return c.plans.Get(ctx, digest)
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

// patchStatus re-reads the runtime and applies change to its status until the write does not
// conflict.
func (c *Controller) patchStatus(ctx context.Context, name string, change func(st *v1alpha1.ClusterRuntimeStatus, gen int64)) error {
	return retryConflict(func() error {
		cur, err := c.store.GetRuntime(ctx, name)
		if err != nil {
			return err
		}
		orig := cur.Status.DeepCopy()
		change(&cur.Status, cur.Generation)
		if equality.Semantic.DeepEqual(*orig, cur.Status) {
			return nil
		}
		_, err = c.store.UpdateRuntimeStatus(ctx, cur)
		return err
	})
}

// writeRuntimeStatus writes what the reconcile learned into the runtime's status
// (status.Record) and records an Event for every condition that changed (status.Transitions).
func (c *Controller) writeRuntimeStatus(ctx context.Context, v *view, now time.Time) error {
	v.in.ActiveDigest, v.in.EnginePolicy = v.at.Plan, v.at.EnginePolicy
	build := buildinfo.Get()
	v.in.Operator = &v1alpha1.OperatorBuild{Version: build.Version, Revision: build.Revision}
	if p, err := c.loadPlan(ctx, v.at.Plan); err == nil && p != nil {
		v.in.ActiveReleases = releaseNames(p)
	}
	conds := status.Conditions(v.in)
	var before []metav1.Condition
	err := c.patchStatus(ctx, v.rt.Name, func(st *v1alpha1.ClusterRuntimeStatus, gen int64) {
		before = slices.Clone(st.Conditions)
		status.Record(st, v.in, conds, gen, now)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of runtime %s: %w", v.rt.Name, err)
	}
	for _, tr := range status.Transitions(before, conds) {
		typ, cnd := corev1Normal, tr.Condition
		if tr.Warning {
			typ = corev1Warning
		}
		c.event(ctx, v.rt, typ, cnd.Reason, fmt.Sprintf("%s=%s: %s", cnd.Type, cnd.Status, cnd.Message))
	}
	return nil
}

func releaseNames(p *plan.Plan) []string {
	out := make([]string, 0, len(p.Releases))
	for _, r := range p.Releases {
		out = append(out, r.Name)
	}
	return out
}

func (c *Controller) knownEngine(rt *v1alpha1.ClusterRuntime) *bus.EngineStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.engine != nil {
		return c.engine
	}
	return status.EngineFromStatus(&rt.Status)
}

func (c *Controller) knownCreds(rt *v1alpha1.ClusterRuntime) *bus.CredentialsStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds != nil {
		return c.creds
	}
	return status.CredentialsFromStatus(&rt.Status)
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
