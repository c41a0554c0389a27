package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

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
