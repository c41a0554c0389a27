package controller

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// prune keeps the runtime's history bounded (spec.rollout.historyLimit): it deletes the ended
// rollouts rollout.Prunable names (each with a UID precondition; their steps ConfigMaps, which
// they own, go with them), then every plan ConfigMap nothing refers to any more. A plan is in
// use while the runtime's status names it (active or desired), the plan the spec resolves to
// now names it, a rollout left names it (from or to), or an owned Application's plan-digest
// annotation names it (readiness judges the Application by that plan); plans are looked at
// only when a rollout ended or was deleted in this reconcile, the only times one falls out of
// use, so a reconcile in between costs no list. It runs after the
// runtime's status is written and decides from the objects read in this reconcile, so a crash
// between two deletes is finished by the next reconcile; nothing is pruned while the runtime
// is being deleted.
func (c *Controller) prune(ctx context.Context, v *view) error {
	if v.deleting {
		return nil
	}
	limit := cmp.Or(int(v.rt.Spec.Rollout.HistoryLimit), rollout.DefaultHistoryLimit)
	dropped := rollout.Prunable(v.rollouts, string(v.rt.UID), v.at.Plan, limit)
	var gone []string
	for _, r := range dropped {
		switch err := c.store.DeleteRollout(ctx, r.Name, string(r.UID)); {
		case err == nil:
			gone = append(gone, r.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// deleted already, or a newer rollout of the name: not the one decided on
		default:
			return fmt.Errorf("delete rollout %s beyond the history limit %d: %w", r.Name, limit, err)
		}
	}
	if len(gone) > 0 {
		c.event(ctx, v.rt, corev1Normal, EventHistoryPruned, fmt.Sprintf("history limit %d: deleted %d ended rollout(s): %s", limit, len(gone), strings.Join(gone, ", ")))
		logging.From(ctx).Info().Strs("rollouts", gone).Int("historyLimit", limit).Msg("ended rollouts beyond the history limit deleted")
	}
	if len(dropped) == 0 && len(v.ended) == 0 {
		return nil // plans fall out of use only when a rollout ends or is deleted
	}
	return c.prunePlans(ctx, v, dropped)
}

// prunePlans deletes the plan ConfigMaps nothing refers to (see prune).
func (c *Controller) prunePlans(ctx context.Context, v *view, dropped []*v1alpha1.RuntimeRollout) error {
	keep := map[string]bool{v.at.Plan: true, v.in.DesiredDigest: true, v.rt.Status.ActivePlan: true, v.rt.Status.DesiredPlan: true}
	rollout.PlansInUse(keep, v.rollouts, dropped)
	if !c.appPlans(keep) {
		// Without the Applications' cache nothing tells which plans they were written from;
		// the next rollout that ends tries again.
		logging.From(ctx).Debug().Msg("plans not pruned: the owned Applications are not cached (yet)")
		return nil
	}
	plans, err := c.store.ListPlans(ctx, c.cfg.Namespace)
	if err != nil {
		return fmt.Errorf("list plans: %w", err)
	}
	var unused []string
	for i := range plans {
		cm := &plans[i]
		digest := cm.Annotations[v1alpha1.AnnotationPlanDigest]
		if digest == "" || keep[digest] {
			continue
		}
		switch err := c.store.DeleteConfigMap(ctx, cm.Namespace, cm.Name, string(cm.UID)); {
		case err == nil || apierrors.IsNotFound(err):
			c.plans.Forget(digest)
			if err == nil {
				unused = append(unused, digest)
			}
		case apierrors.IsConflict(err):
		default:
			return fmt.Errorf("delete plan %s, which nothing refers to: %w", digest, err)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		c.event(ctx, v.rt, corev1Normal, EventHistoryPruned, fmt.Sprintf("deleted %d plan(s) nothing refers to any more: %s", len(unused), strings.Join(unused, ", ")))
		logging.From(ctx).Info().Strs("plans", unused).Msg("plans nothing refers to deleted")
	}
	return nil
}

// appPlans adds the plans the owned Applications were written from (their plan-digest
// annotation) to keep; false when the Applications' cache is not there or not synced yet.
func (c *Controller) appPlans(keep map[string]bool) bool {
	if c.drift == nil || !c.drift.informer.HasSynced() {
		return false
	}
	for _, obj := range c.drift.informer.GetStore().List() {
		if app, ok := obj.(*argoapp.Application); ok {
			keep[app.Annotations[v1alpha1.AnnotationPlanDigest]] = true
		}
	}
	return true
}
