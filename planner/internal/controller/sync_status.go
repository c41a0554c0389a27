package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/status"
	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

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
