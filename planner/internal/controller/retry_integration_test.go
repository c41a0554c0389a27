//go:build integration

package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// fail publishes the applier's Failed answer to c: the step fails at once, and so the rollout.
func (h *harness) fail(c *command) {
	h.t.Helper()
	res := &bus.ApplyResult{CommandID: c.msgID, Runtime: h.name, Release: c.release, Step: c.step, Action: c.action,
		Outcome: bus.OutcomeFailed, Reason: "ApplyFailed", Message: "the test's applier refused"}
	if err := h.pub.Publish(context.Background(), bus.AppliedSubject(h.name, c.release), c.msgID+"/result", res); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setBundle(comps []map[string]any) {
	h.t.Helper()
	ctx := context.Background()
	cm, err := h.core.CoreV1().ConfigMaps(ns).Get(ctx, "retry-bundle", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cm.Data["bundle.yaml"] = bundleYAML(h.t, comps)
	if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// TestRetryAndBackToThePreviousPlan proves the two ways out of a failed upgrade that
// `kubectl aicr retry` and docs/planner.md ("Back to a previous plan") describe, with the test as
// applier and readiness over NATS:
//
//   - retry: the failed rollout deleted exactly as it was read (UID and resourceVersion
//     preconditions, as the plugin deletes it) is created again by the planner with the same
//     name, its step published anew (a new message ID), and the move succeeds;
//   - back: the bundle put back as it was resolves to the earlier plan's digest, and the
//     planner rolls the stack back to it, release by release, to Ready at that plan.
func TestRetryAndBackToThePreviousPlan(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deleteRuntime() // an earlier test's: there is one ClusterRuntime, named cluster
	v1 := []map[string]any{component("rt-a", 1), component("rt-b", 1, "rt-a")}
	v2 := []map[string]any{v1[0], component("rt-b", 2, "rt-a")}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "retry-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, v1)}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "retry-bundle"}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	stop := h.startPlanner()
	defer func() { stop() }()
	defer h.deleteRuntime() // while the planner runs: it removes its finalizer
	h.answer(h.mustNext())
	h.answer(h.mustNext())
	rolledOut := func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut && rt.Status.ActivePlan == rt.Status.DesiredPlan
	}
	planV1 := h.waitRuntime("Ready at the first plan", rolledOut).Status.ActivePlan

	// The upgrade fails: the runtime is stalled on the failed rollout.
	h.setBundle(v2)
	up := h.mustNext()
	if up.release != "rt-b" || up.action != v1alpha1.ActionUpgrade {
		t.Fatalf("first command of the upgrade: %s %s", up.release, up.action)
	}
	h.fail(up)
	stalled := h.waitRuntime("Stalled=True RolloutFailed", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionStalled) == v1alpha1.ReasonRolloutFailed
	})
	planV2, name := stalled.Status.DesiredPlan, stalled.Status.Rollout
	// As a person finds it once the planner is done with it: ended, and labelled with its outcome.
	failed := h.waitRollout(name, func(r *v1alpha1.RuntimeRollout) bool {
		return r.Status.Outcome == v1alpha1.OutcomeFailed && r.Labels[v1alpha1.LabelOutcome] == v1alpha1.OutcomeFailed
	})

	// retry: delete it as it was read. The planner creates the same move again and starts its step.
	uid, rv := failed.UID, failed.ResourceVersion
	err := h.kube.rc.Delete().Resource(resRollouts).Name(name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}).Do(ctx).Error()
	if err != nil {
		t.Fatalf("delete the failed rollout as read: %v", err)
	}
	again := h.mustNext()
	if again.step.Rollout != name || again.step.RolloutUID == string(uid) || again.msgID == up.msgID || again.release != "rt-b" {
		t.Fatalf("after the retry: command %s for %s of rollout %s (uid %s); want rt-b's step of a new %s", again.msgID, again.release, again.step.Rollout, again.step.RolloutUID, name)
	}
	h.answer(again)
	retried := h.waitRuntime("Ready at the second plan after the retry", func(rt *v1alpha1.ClusterRuntime) bool {
		return rolledOut(rt) && rt.Status.ActivePlan == planV2
	})
	if retried.Status.ActivePlan != planV2 || retried.Status.Rollout != name {
		t.Fatalf("after the retry: active plan %s by rollout %s, want %s by %s", retried.Status.ActivePlan, retried.Status.Rollout, planV2, name)
	}

	// Back to the previous plan: the bundle as it was gives the first plan's digest again.
	h.setBundle(v1)
	h.order = nil
	back := h.mustNext()
	h.answer(back)
	if fmt.Sprint(h.order) != "[rt-b(Upgrade)]" || back.apply.PlanDigest != planV1 {
		t.Fatalf("rolling back: commands %v to plan %s, want rt-b's step to %s", h.order, back.apply.PlanDigest, planV1)
	}
	got := h.waitRuntime("Ready at the first plan again", func(rt *v1alpha1.ClusterRuntime) bool {
		return rolledOut(rt) && rt.Status.ActivePlan == planV1
	})
	ro, err := h.kube.GetRollout(ctx, got.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Spec.FromDigest != planV2 || ro.Spec.ToDigest != planV1 || ro.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Errorf("the rollout back %s: %s -> %s, %s; want %s -> %s, succeeded", ro.Name, ro.Spec.FromDigest, ro.Spec.ToDigest, ro.Status.Outcome, planV2, planV1)
	}
}
