package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// view is what one reconcile of a runtime learned; it feeds the runtime's status.
type view struct {
	rt        *v1alpha1.ClusterRuntime
	in        status.Inputs
	active    string
	policy    string
	suspended bool // suspension writes were published for this generation
	resumed   bool
}

// Sync reconciles one runtime: finalizer, plan, rollouts, steps, suspension and status. It is
// idempotent: running it twice in a row publishes and writes nothing the second time.
func (c *Controller) Sync(ctx context.Context, name string) error {
	unlock := c.locks.lock(name)
	defer unlock()
	log := logging.From(ctx).With().Str(logging.KeyRuntime, name).Logger()
	ctx = logging.Into(ctx, log)

	rt, err := c.store.GetRuntime(ctx, name)
	if kerrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.resolved, name)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runtime %s: %w", name, err)
	}
	now := c.cfg.Clock.Now()
	deleting := rt.DeletionTimestamp != nil
	hasFinalizer := slices.Contains(rt.Finalizers, v1alpha1.RuntimeFinalizer)
	if !deleting && (rt.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete) != hasFinalizer {
		if rt, err = c.setFinalizer(ctx, rt, !hasFinalizer); err != nil {
			return err
		}
		hasFinalizer = !hasFinalizer
	}
	if deleting && !hasFinalizer {
		return nil
	}

	v := &view{rt: rt, active: rt.Status.ActivePlan, policy: rt.Status.EnginePolicy}
	v.in = status.Inputs{Runtime: rt, Engine: c.knownEngine(rt), Credentials: c.knownCreds(rt)}

	rollouts, err := c.store.ListRollouts(ctx, name)
	if err != nil {
		return fmt.Errorf("list rollouts of %s: %w", name, err)
	}
	sort.Slice(rollouts, func(i, j int) bool {
		return rollouts[i].CreationTimestamp.Before(&rollouts[j].CreationTimestamp) ||
			(rollouts[i].CreationTimestamp.Equal(&rollouts[j].CreationTimestamp) && rollouts[i].Name < rollouts[j].Name)
	})
	for i := range rollouts {
		if err := c.labelOutcome(ctx, &rollouts[i]); err != nil {
			return err
		}
	}
	c.adoptSucceeded(v, rollouts)

	var inflight *v1alpha1.RuntimeRollout
	for i := range rollouts {
		r := &rollouts[i]
		if rollout.Terminal(r.Status.Phase) || r.Spec.RuntimeUID != string(rt.UID) {
			continue
		}
		if inflight == nil {
			inflight = r
			continue
		}
		// Two rollouts in flight cannot come from this planner; end the later one if it
		// never started, else leave it to its timeout.
		if err := c.supersede(ctx, rt, r, inflight.Spec.ToDigest, now); err != nil {
			return err
		}
	}

	// The plan the spec asks for.
	var desired *plan.Plan
	if !deleting {
		desired = c.resolve(ctx, v, now)
		if desired != nil {
			v.in.DesiredDigest = desired.Digest()
			if err := c.storePlan(ctx, v, desired); err != nil {
				return err
			}
		}
	}
	var activePlan *plan.Plan
	if v.active != "" {
		if activePlan, err = c.loadPlan(ctx, v.active); err != nil {
			v.in.PlanUnreadable = fmt.Sprintf("the active plan %s cannot be read (%v); no rollout starts until it is restored or the spec changes", v.active, err)
			log.Warn().Err(err).Str(logging.KeyPlanDigest, v.active).Msg("read active plan")
		}
	}

	// Where the stack should go next.
	target, reason, haveTarget := "", "", false
	policyMove := v.active != "" && v.policy != v1alpha1.EnginePolicyArgoCDV2
	switch {
	case deleting && rt.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete && v.active != "":
		target, reason, haveTarget = "", v1alpha1.RolloutReasonRuntimeDeleted, true
	case deleting:
		if inflight == nil || !rollout.Started(inflight) || rt.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
			c.event(ctx, rt, corev1Normal, "FinalizerReleased", fmt.Sprintf("deletionPolicy %s: the stack is left in place", nonEmpty(string(rt.Spec.DeletionPolicy), "Retain")))
			_, err := c.setFinalizer(ctx, rt, false)
			return err
		}
	case desired != nil && (desired.Digest() != v.active || policyMove):
		target, reason, haveTarget = desired.Digest(), v1alpha1.RolloutReasonPlanChanged, true
		if policyMove {
			reason = v1alpha1.RolloutReasonEnginePolicyChanged
		}
	}

	if inflight != nil && haveTarget && (inflight.Spec.ToDigest != target || inflight.Spec.Reason != reason && reason == v1alpha1.RolloutReasonRuntimeDeleted) {
		if rollout.Started(inflight) {
			what := "plan " + target
			if reason == v1alpha1.RolloutReasonRuntimeDeleted {
				what = "the runtime's removal"
			}
			v.in.Waiting = fmt.Sprintf("%s waits for rollout %s, which has started steps, to finish", what, inflight.Name)
		} else {
			if err := c.supersede(ctx, rt, inflight, nonEmpty(target, "(removal)"), now); err != nil {
				return err
			}
			inflight = nil
		}
	}

	if inflight == nil && haveTarget && v.in.PlanUnreadable == "" {
		nm := rollout.Name(v.active, target)
		var existing *v1alpha1.RuntimeRollout
		for i := range rollouts {
			if rollouts[i].Name == nm {
				existing = &rollouts[i]
			}
		}
		if existing != nil && existing.Spec.RuntimeUID != string(rt.UID) {
			// A rollout of an earlier runtime of the same name: history of a stack that was
			// deleted; make room.
			if err := c.store.DeleteRollout(ctx, nm, string(existing.UID)); err != nil && !kerrors.IsNotFound(err) && !kerrors.IsConflict(err) {
				return fmt.Errorf("delete rollout %s: %w", nm, err)
			}
			existing = nil
		}
		switch {
		case existing == nil:
		case existing.Status.Phase == v1alpha1.PhaseSuperseded || existing.Status.Phase == v1alpha1.PhaseSucceeded:
			// History of the same move: make room for a fresh rollout.
			if err := c.store.DeleteRollout(ctx, existing.Name, string(existing.UID)); err != nil && !kerrors.IsNotFound(err) {
				return fmt.Errorf("delete ended rollout %s: %w", existing.Name, err)
			}
			existing = nil
		case rollout.Terminal(existing.Status.Phase):
			v.in.Last = existing
		default:
			inflight = existing
		}
		if existing == nil {
			if inflight, err = c.createRollout(ctx, rt, nm, v.active, target, reason, now); err != nil {
				return err
			}
		}
	}

	if inflight != nil {
		if inflight, err = c.initialize(ctx, inflight); err != nil {
			return err
		}
		r, res, err := c.advanceFrom(ctx, rt, inflight.Name, inflight, nil)
		if err != nil {
			return err
		}
		inflight = r
		if res.Ended != "" {
			c.rolloutEnded(ctx, v, r)
			if err := c.labelOutcome(ctx, r); err != nil {
				return err
			}
		}
		if !res.Wake.IsZero() {
			c.queue.AddAfter(name, max(res.Wake.Sub(now), time.Millisecond))
		}
		if kept := c.notes.oldest(r.Name); !kept.IsZero() {
			c.queue.AddAfter(name, max(kept.Add(NoteDelay).Sub(now), time.Millisecond))
		}
		if rollout.Terminal(r.Status.Phase) {
			if r.Status.Phase != v1alpha1.PhaseSucceeded {
				v.in.Last = r
			}
			inflight = nil
		}
	}
	v.in.InFlight = inflight
	if v.in.Last != nil && (v.in.Last.Spec.ToDigest == v.active && v.in.Last.Spec.Reason != v1alpha1.RolloutReasonEnginePolicyChanged) {
		v.in.Last = nil
	}

	if deleting && inflight == nil && v.in.Last == nil && v.active == "" {
		c.event(ctx, rt, corev1Normal, "FinalizerReleased", "every release was removed")
		_, err := c.setFinalizer(ctx, rt, false)
		return err
	}

	if err := c.engineSuspension(ctx, v, activePlan, inflight); err != nil {
		return err
	}
	return c.writeRuntimeStatus(ctx, v, now)
}

// adoptSucceeded moves the active plan forward when the latest finished rollout succeeded from
// it but the runtime's status was not written (the planner stopped in between).
func (c *Controller) adoptSucceeded(v *view, rollouts []v1alpha1.RuntimeRollout) {
	var latest *v1alpha1.RuntimeRollout
	for i := range rollouts {
		r := &rollouts[i]
		if r.Status.FinishedAt == nil || r.Spec.RuntimeUID != string(v.rt.UID) || r.Status.Phase == v1alpha1.PhaseSuperseded {
			continue
		}
		// Finish times have one-second precision, and fast rollouts finish within the same
		// second: on a tie, the rollout that moved away from the active plan is the later one
		// (its predecessor's success made that plan active), so it wins.
		if latest == nil || latest.Status.FinishedAt.Before(r.Status.FinishedAt) ||
			(latest.Status.FinishedAt.Equal(r.Status.FinishedAt) && latest.Spec.FromDigest != v.active && r.Spec.FromDigest == v.active) {
			latest = r
		}
	}
	if latest != nil && latest.Status.Phase == v1alpha1.PhaseSucceeded && latest.Spec.FromDigest == v.active {
		v.active = latest.Spec.ToDigest
		v.policy = v1alpha1.EnginePolicyArgoCDV2
	}
}

func (c *Controller) rolloutEnded(ctx context.Context, v *view, r *v1alpha1.RuntimeRollout) {
	typ := corev1Warning
	if r.Status.Phase == v1alpha1.PhaseSucceeded {
		typ = corev1Normal
		v.active = r.Spec.ToDigest
		v.policy = v1alpha1.EnginePolicyArgoCDV2
	}
	c.event(ctx, v.rt, typ, r.Status.Outcome, fmt.Sprintf("rollout %s: %s", r.Name, r.Status.Message))
	logging.From(ctx).Info().Str(logging.KeyRollout, r.Name).Str(logging.KeyOutcome, r.Status.Outcome).Msg("rollout ended")
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
		if kerrors.IsConflict(err) {
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
	if kerrors.IsNotFound(err) {
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
	src := rt.Spec.Bundle.ConfigMap
	fail := func(reason, msg string) *plan.Plan {
		v.in.ResolveReason, v.in.ResolveMessage = reason, msg
		return nil
	}
	if src == nil {
		return fail(v1alpha1.ReasonBundleInvalid, "spec.bundle: set configMap (name, and optionally namespace and key) to the bundle's ConfigMap")
	}
	ns, key := nonEmpty(src.Namespace, c.cfg.Namespace), nonEmpty(src.Key, "bundle.yaml")
	cm, err := c.store.GetConfigMap(ctx, ns, src.Name)
	if err != nil {
		if kerrors.IsNotFound(err) {
			return fail(v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap: ConfigMap %s/%s does not exist; create it with the bundle under key %s", ns, src.Name, key))
		}
		if kerrors.IsForbidden(err) {
			return fail(v1alpha1.ReasonUnauthorized, fmt.Sprintf("spec.bundle.configMap: the planner may not read ConfigMap %s/%s", ns, src.Name))
		}
		return fail(v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap: read ConfigMap %s/%s: %v", ns, src.Name, err))
	}
	rkey := fmt.Sprintf("%d/%s/%s/%s", rt.Generation, cm.UID, cm.ResourceVersion, key)
	c.mu.Lock()
	cached, ok := c.resolved[rt.Name]
	c.mu.Unlock()
	if ok && cached.key == rkey {
		v.in.ResolveReason, v.in.ResolveMessage = cached.reason, cached.msg
		return cached.plan
	}
	// Say Resolving while the plan is computed (large bundles take a moment).
	_ = c.patchStatus(ctx, rt.Name, func(st *v1alpha1.ClusterRuntimeStatus, gen int64) {
		status.Apply(st, []metav1.Condition{{Type: v1alpha1.ConditionResolved, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonResolving, Message: "computing the plan", ObservedGeneration: gen}}, now)
	})
	res := resolution{key: rkey}
	data, found := cm.Data[key]
	switch {
	case !found:
		res.reason, res.msg = v1alpha1.ReasonBundleUnavailable, fmt.Sprintf("spec.bundle.configMap.key: ConfigMap %s/%s has no key %q", ns, src.Name, key)
	default:
		b, err := plan.ParseBundle([]byte(data))
		if err == nil {
			res.plan, err = plan.Resolve(b, plan.Inputs{
				Overrides: rt.Spec.Overrides, Placement: rt.Spec.Placement,
				ForbiddenNamespaces: []string{c.cfg.Namespace, c.cfg.EngineNamespace},
			})
		}
		if err != nil {
			res.plan = nil
			res.reason, res.msg = plan.ReasonOf(err), err.Error()
		}
	}
	c.mu.Lock()
	c.resolved[rt.Name] = res
	c.mu.Unlock()
	v.in.ResolveReason, v.in.ResolveMessage = res.reason, res.msg
	return res.plan
}

func (c *Controller) storePlan(ctx context.Context, v *view, p *plan.Plan) error {
	c.mu.Lock()
	_, known := c.plans[p.Digest()]
	c.mu.Unlock()
	if known {
		return nil
	}
	cm, err := p.ConfigMap(c.cfg.Namespace)
	if err != nil {
		v.in.ResolveReason, v.in.ResolveMessage = plan.ReasonOf(err), err.Error()
		v.in.DesiredDigest = ""
		return nil
	}
	if err := c.store.CreateConfigMap(ctx, cm); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("store plan %s: %w", p.Digest(), err)
	}
	c.mu.Lock()
	c.plans[p.Digest()] = p
	c.mu.Unlock()
	return nil
}

func (c *Controller) loadPlan(ctx context.Context, digest string) (*plan.Plan, error) {
	if digest == "" {
		return nil, nil
	}
	c.mu.Lock()
	p, ok := c.plans[digest]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	cm, err := c.store.GetConfigMap(ctx, c.cfg.Namespace, plan.ConfigMapName(digest))
	if err != nil {
		return nil, fmt.Errorf("get plan %s: %w", digest, err)
	}
	if p, err = plan.FromConfigMap(cm); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.plans[digest] = p
	c.mu.Unlock()
	return p, nil
}

func (c *Controller) createRollout(ctx context.Context, rt *v1alpha1.ClusterRuntime, name, from, to, reason string, now time.Time) (*v1alpha1.RuntimeRollout, error) {
	deadline := metav1.NewTime(now.Add(durationOr(rt.Spec.Rollout.Deadline, rollout.DefaultDeadline)).UTC().Truncate(time.Second))
	r := &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRuntime: rt.Name},
		},
		Spec: v1alpha1.RuntimeRolloutSpec{
			Runtime: rt.Name, RuntimeUID: string(rt.UID), FromDigest: from, ToDigest: to, Reason: reason, Deadline: &deadline,
		},
	}
	out, err := c.store.CreateRollout(ctx, r)
	if kerrors.IsAlreadyExists(err) {
		out, err = c.store.GetRollout(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create rollout %s: %w", name, err)
	}
	c.event(ctx, rt, corev1Normal, "RolloutCreated", fmt.Sprintf("rollout %s (%s) from plan %s to %s", name, reason, nonEmpty(from, "(none)"), nonEmpty(to, "(none)")))
	logging.From(ctx).Info().Str(logging.KeyRollout, name).Str(logging.KeyReason, reason).Msg("rollout created")
	return out, nil
}

// initialize fills a new rollout's steps from its two plans (again after a crash between
// create and the first status write: plan.Steps is deterministic).
func (c *Controller) initialize(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	if r.Status.Phase != "" {
		return r, nil
	}
	from, err := c.loadPlan(ctx, r.Spec.FromDigest)
	if err != nil {
		return nil, err
	}
	to, err := c.loadPlan(ctx, r.Spec.ToDigest)
	if err != nil {
		return nil, err
	}
	steps := plan.Steps(from, to, plan.StepOptions{ApplyAll: r.Spec.Reason == v1alpha1.RolloutReasonEnginePolicyChanged})
	if steps == nil {
		steps = []v1alpha1.Step{}
	}
	var out *v1alpha1.RuntimeRollout
	err = retryConflict(func() error {
		cur, err := c.store.GetRollout(ctx, r.Name)
		if err != nil {
			return err
		}
		if cur.Status.Phase != "" {
			out = cur
			return nil
		}
		rollout.Initialize(cur, steps)
		out, err = c.store.UpdateRolloutStatus(ctx, cur)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("initialize rollout %s: %w", r.Name, err)
	}
	return out, nil
}

func (c *Controller) supersede(ctx context.Context, rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout, newer string, now time.Time) error {
	var out *v1alpha1.RuntimeRollout
	done := false
	err := retryConflict(func() error {
		cur, err := c.store.GetRollout(ctx, r.Name)
		if err != nil {
			return err
		}
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
		c.event(ctx, rt, corev1Normal, v1alpha1.OutcomeSuperseded, fmt.Sprintf("rollout %s: %s", r.Name, out.Status.Message))
		return c.labelOutcome(ctx, out)
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
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("label outcome of rollout %s: %w", r.Name, err)
	}
	return nil
}

// env is what the scheduler needs to know about the runtime.
func (c *Controller) env(rt *v1alpha1.ClusterRuntime, now time.Time) rollout.Env {
	e := rollout.Env{
		Now:                now,
		Parallelism:        int(rt.Spec.Rollout.Parallelism),
		ActionTimeout:      durationOr(rt.Spec.Rollout.ActionTimeout, rollout.DefaultActionTimeout),
		ValidationDisabled: validationDisabled(rt),
		Identities:         c.cfg.Identities,
	}
	engine, creds := c.knownEngine(rt), c.knownCreds(rt)
	switch {
	case rt.Spec.SuspendEngine:
		e.Hold = &rollout.Hold{Reason: v1alpha1.ReasonEngineSuspended, Message: "spec.suspendEngine is true: no step starts while Argo CD's automated sync is off"}
	case rt.Spec.Paused:
		e.Hold = &rollout.Hold{Reason: v1alpha1.ReasonPaused, Message: "spec.paused is true"}
	case engine != nil && !engine.Available:
		e.Hold = &rollout.Hold{Reason: nonEmpty(engine.Reason, v1alpha1.ReasonEngineMissing), Message: "Argo CD is not available: " + engine.Message}
	case creds != nil && !creds.OK:
		e.Hold = &rollout.Hold{Reason: nonEmpty(creds.Reason, v1alpha1.ReasonRegistryCredentialsUnavailable), Message: "registry credentials: " + creds.Message}
	}
	if creds != nil && creds.ExpiresAt != nil {
		e.CredentialsExpireAt = *creds.ExpiresAt
	}
	return e
}

// advance re-reads the rollout, applies observe (may be nil), runs the scheduler, writes the
// status when it changed (re-reading on a conflict) and publishes every command not yet
// published. It returns the rollout as written.
func (c *Controller) advance(ctx context.Context, rt *v1alpha1.ClusterRuntime, name string, observe func(r *v1alpha1.RuntimeRollout)) (*v1alpha1.RuntimeRollout, rollout.Result, error) {
	return c.advanceFrom(ctx, rt, name, nil, observe)
}

// advanceFrom is advance starting from read, the rollout as the caller just read it under the
// runtime's lock (nil: read it). Only a conflict reads it again: a step cost four reads of the
// whole rollout, each as large as its steps (make bench).
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
		if apierrors.Semantic.DeepEqual(*orig, cur.Status) {
			out = cur
			return nil
		}
		var err error
		if out, err = c.store.UpdateRolloutStatus(ctx, cur); err == nil {
			wrote = true
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
		if !c.published[rollout.CommandID(rollout.StepID(r.Name, st.Index), st.Attempt)] {
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
		if err := c.publishStep(ctx, rt, r, s, st.Attempt, false); err != nil {
			return err
		}
	}
	return nil
}

// publishStep publishes a step's command with message ID "<stepID>/<attempt>", once per
// process (JetStream drops a republish after a restart within its window).
func (c *Controller) publishStep(ctx context.Context, rt *v1alpha1.ClusterRuntime, r *v1alpha1.RuntimeRollout, s *v1alpha1.Step, attempt string, force bool) error {
	stepID := rollout.StepID(r.Name, s.Index)
	id := rollout.CommandID(stepID, attempt)
	started := time.Time{}
	if s.StartedAt != nil {
		started = s.StartedAt.UTC()
	}
	ref := bus.StepRef{Rollout: r.Name, Index: s.Index, ID: stepID, Started: started}
	if s.Action == v1alpha1.ActionRemove {
		return c.publishOnce(ctx, bus.RemoveSubject(rt.Name, s.Release), id, &bus.RemoveCommand{
			Runtime: rt.Name, RuntimeUID: r.Spec.RuntimeUID, Step: ref, Release: s.Release,
		})
	}
	return c.publishOnce(ctx, bus.ApplySubject(rt.Name, s.Release), id, &bus.ApplyCommand{
		Runtime: rt.Name, RuntimeUID: r.Spec.RuntimeUID, Step: ref, Release: s.Release, Action: s.Action,
		PlanDigest: r.Spec.ToDigest, ReadinessGate: s.ReadinessGate, SuspendEngine: rt.Spec.SuspendEngine,
		EnginePolicy: v1alpha1.EnginePolicyArgoCDV2, Force: force,
	})
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
	c.mu.Lock()
	if len(c.published) > 100000 { // bound memory; a republish is harmless
		c.published = map[string]bool{}
	}
	c.published[id] = true
	c.mu.Unlock()
	logging.From(ctx).Debug().Str(logging.KeySubject, subject).Str(logging.KeyMsgID, id).Msg("command published")
	return true, nil
}

// engineSuspension writes every owned Application with automated sync off when the runtime
// says suspendEngine and no step is in flight, and back on when it stops saying so.
func (c *Controller) engineSuspension(ctx context.Context, v *view, active *plan.Plan, inflight *v1alpha1.RuntimeRollout) error {
	rt := v.rt
	prev := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
	wasSuspended := prev != nil && prev.Reason == v1alpha1.ReasonEngineSuspended
	if rt.Spec.SuspendEngine {
		if inflight != nil {
			for i := range inflight.Status.Steps {
				s := &inflight.Status.Steps[i]
				if s.State == v1alpha1.StepInProgress || s.State == v1alpha1.StepBlocked {
					v.in.SuspensionRefused = fmt.Sprintf("step %d/%d %s (%s) of rollout %s is in flight; automated sync is turned off once it finishes",
						s.Index, len(inflight.Status.Steps), s.Release, s.Action, inflight.Name)
					return nil
				}
			}
		}
		if wasSuspended && prev.ObservedGeneration == rt.Generation {
			return nil
		}
		return c.rewriteAll(ctx, v, active, inflight, true, fmt.Sprintf("suspend-g%d", rt.Generation))
	}
	if wasSuspended {
		return c.rewriteAll(ctx, v, active, inflight, false, fmt.Sprintf("resume-g%d", rt.Generation))
	}
	return nil
}

func (c *Controller) rewriteAll(ctx context.Context, v *view, active *plan.Plan, inflight *v1alpha1.RuntimeRollout, suspend bool, tag string) error {
	if active == nil {
		return nil
	}
	names := make([]string, 0, len(active.Releases))
	for _, r := range active.Releases {
		names = append(names, r.Name)
	}
	digests := rollout.ReleaseDigests(names, v.active, inflight)
	keys := make([]string, 0, len(digests))
	for k := range digests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := c.cfg.Clock.Now().UTC()
	for _, rel := range keys {
		digest := digests[rel]
		stepID := repairID(digest, tag)
		if err := c.publishOnce(ctx, bus.ApplySubject(v.rt.Name, rel), stepID+"/"+rel, &bus.ApplyCommand{
			Runtime: v.rt.Name, RuntimeUID: string(v.rt.UID), Step: bus.StepRef{ID: stepID, Started: now},
			Release: rel, Action: v1alpha1.ActionApply, PlanDigest: digest, SuspendEngine: suspend,
			EnginePolicy: v1alpha1.EnginePolicyArgoCDV2, Force: true,
		}); err != nil {
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
		if apierrors.Semantic.DeepEqual(*orig, cur.Status) {
			return nil
		}
		_, err = c.store.UpdateRuntimeStatus(ctx, cur)
		return err
	})
}

func (c *Controller) writeRuntimeStatus(ctx context.Context, v *view, now time.Time) error {
	v.in.ActiveDigest = v.active
	conds := status.Conditions(v.in)
	progress := status.Progress(v.in)
	var before []metav1.Condition
	err := c.patchStatus(ctx, v.rt.Name, func(st *v1alpha1.ClusterRuntimeStatus, gen int64) {
		before = slices.Clone(st.Conditions)
		st.ObservedGeneration = gen
		st.ActivePlan = v.active
		st.DesiredPlan = v.in.DesiredDigest
		if v.in.InFlight != nil {
			st.Rollout = v.in.InFlight.Name
		} else if v.in.Last != nil {
			st.Rollout = v.in.Last.Name
		}
		st.Progress = progress
		if v.policy != "" {
			st.EnginePolicy = v.policy
		}
		if v.in.Credentials != nil {
			st.Credentials = status.CredentialsStatus(v.in.Credentials)
		}
		status.Apply(st, conds, now)
	})
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of runtime %s: %w", v.rt.Name, err)
	}
	for _, cnd := range conds {
		old := meta.FindStatusCondition(before, cnd.Type)
		if old != nil && old.Status == cnd.Status && old.Reason == cnd.Reason {
			continue
		}
		typ := corev1Normal
		if (cnd.Type == v1alpha1.ConditionStalled && cnd.Status == metav1.ConditionTrue) ||
			(cnd.Type != v1alpha1.ConditionStalled && cnd.Status == metav1.ConditionFalse && cnd.Reason != v1alpha1.ReasonRollingOut && cnd.Reason != v1alpha1.ReasonResolving) {
			typ = corev1Warning
		}
		c.event(ctx, v.rt, typ, cnd.Reason, fmt.Sprintf("%s=%s: %s", cnd.Type, cnd.Status, cnd.Message))
	}
	return nil
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

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
