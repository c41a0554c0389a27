package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/planner/internal/status"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

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

// releaseFinalizer lets a runtime being deleted go, with an Event saying why.
func (c *Controller) releaseFinalizer(ctx context.Context, rt *v1alpha1.ClusterRuntime, why string) error {
	c.event(ctx, rt, corev1Normal, EventFinalizerReleased, why)
	_, err := c.setFinalizer(ctx, rt, false)
	return err
}

func (c *Controller) setFinalizer(ctx context.Context, rt *v1alpha1.ClusterRuntime, add bool) (*v1alpha1.ClusterRuntime, error) {
	cur, err := c.updateRuntime(ctx, rt, func(cur *v1alpha1.ClusterRuntime) *v1alpha1.ClusterRuntime {
		fin := slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == v1alpha1.RuntimeFinalizer })
		if add {
			fin = append(fin, v1alpha1.RuntimeFinalizer)
		}
		if slices.Equal(fin, cur.Finalizers) {
			return nil
		}
		next := cur.DeepCopy()
		next.Finalizers = fin
		return next
	})
	if apierrors.IsNotFound(err) {
		return cur, nil
	}
	if err != nil {
		return nil, fmt.Errorf("update finalizer of %s: %w", rt.Name, err)
	}
	return cur, nil
}

// updateRuntime writes edit's change of the runtime's metadata, starting from rt as already
// read: the first try costs no GET. After a conflict it reads the runtime again and asks edit
// again. edit returns the changed copy, or nil when the runtime needs no write. It returns the
// runtime as last written or read (rt when nothing was).
func (c *Controller) updateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime, edit func(cur *v1alpha1.ClusterRuntime) *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	cur := rt
	err := retryConflict(func() error {
		next := edit(cur)
		if next == nil {
			return nil
		}
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
	return cur, err
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
