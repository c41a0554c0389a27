package kube

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Events lists the Events about the operator's objects (the ClusterRuntime and the
// RuntimeRollouts), which the planner records in the operator namespace, oldest first. kind and
// name narrow them to one object; empty, they match any.
func (c *Client) Events(ctx context.Context, kind, name string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.apiVersion": v1alpha1.SchemeGroupVersion.String()}
	if kind != "" {
		sel["involvedObject.kind"] = kind
	}
	if name != "" {
		sel["involvedObject.name"] = name
	}
	list, err := c.Kube.CoreV1().Events(c.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("list events in %s: %w", c.Namespace, err)
	}
	out := list.Items
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := EventTime(&out[i]), EventTime(&out[j])
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// EventTime is when an Event was last seen: its last timestamp, else its event time (an
// events.k8s.io Event), else its first timestamp, else its creation.
func EventTime(ev *corev1.Event) metav1.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp
	case !ev.EventTime.IsZero():
		return metav1.NewTime(ev.EventTime.Time)
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp
	}
	return ev.CreationTimestamp
}

// RuntimeRollouts lists the RuntimeRollouts of the ClusterRuntime, newest first (by creation, in
// one second by their first step's start), with the steps their status holds
// (Status.StepCounts counts every step): history needs no step ConfigMap.
func (c *Client) RuntimeRollouts(ctx context.Context) ([]*Rollout, error) {
	list, err := c.Operator.Rollouts().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list runtimerollouts: %w", err)
	}
	var out []*Rollout
	for i := range list.Items {
		if ro := &list.Items[i]; ro.Spec.Runtime == v1alpha1.RuntimeName {
			out = append(out, &Rollout{RuntimeRollout: ro})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		si, sj := out[i].Status.StartedAt, out[j].Status.StartedAt
		if si != nil && sj != nil && !si.Equal(sj) {
			return sj.Before(si)
		}
		return out[i].Name > out[j].Name
	})
	return out, nil
}

// DeleteRollout deletes the rollout exactly as it was read: the API server refuses the delete
// when its UID or resourceVersion changed since (a new rollout of the same name, or a status
// written by the planner), so nothing is deleted that the caller did not see.
func (c *Client) DeleteRollout(ctx context.Context, ro *Rollout) error {
	uid, rv := ro.UID, ro.ResourceVersion
	err := c.Operator.Rollouts().Delete(ctx, ro.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("delete runtimerollout %s: it changed since it was read at resourceVersion %s; look at it again (kubectl aicr describe %s): %w", ro.Name, rv, ro.Name, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("delete runtimerollout %s: it is gone already", ro.Name)
	}
	return fmt.Errorf("delete runtimerollout %s: %w", ro.Name, err)
}
