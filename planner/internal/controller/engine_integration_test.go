//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// createEngineRuntime creates the bundle ConfigMap (two releases, b after a) and the runtime,
// and deletes both when the test ends.
func (h *harness) createEngineRuntime() {
	h.t.Helper()
	h.deleteRuntime() // an earlier test's: there is one ClusterRuntime, named cluster
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "engine-bundle", Namespace: ns},
		Data: map[string]string{"bundle.yaml": bundleYAML(h.t, []map[string]any{component("eng-a", 1), component("eng-b", 1, "eng-a")})}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = h.core.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: cm.Name}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		h.t.Fatal(err)
	}
}

// TestNoStepStartsBeforeTheEngineReport proves that until readiness says whether Argo CD is
// there, the planner writes the rollout but starts no step and publishes no command, and says
// why on the runtime; readiness's report then starts the first step. (A step started before
// the report could write an Application the API server has no kind for: Argo CD's CRDs may be
// missing.)
func TestNoStepStartsBeforeTheEngineReport(t *testing.T) {
	h := newBareHarness(t)
	h.createEngineRuntime()
	stop := h.startPlanner()
	defer stop()
	defer h.deleteRuntime() // while the planner runs: it removes its finalizer

	rt := h.waitRuntime("a rollout held for the engine report", func(rt *v1alpha1.ClusterRuntime) bool {
		ready := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
		return rt.Status.Rollout != "" && ready != nil && strings.Contains(ready.Message, rollout.EngineNotReportedMessage)
	})
	if c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionEngineAvailable); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonEngineNotReported {
		t.Errorf("EngineAvailable %+v, want Unknown/%s", c, v1alpha1.ReasonEngineNotReported)
	}
	ro, err := h.kube.GetRollout(context.Background(), rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ro.Status.Steps {
		if s.State != v1alpha1.StepPending || s.StartedAt != nil {
			t.Errorf("before the engine report, step %d %s is %s (started %v)", s.Index, s.Release, s.State, s.StartedAt)
		}
	}
	if !strings.Contains(ro.Status.Message, "no step starts: "+rollout.EngineNotReportedMessage) {
		t.Errorf("rollout message %q does not say why no step starts", ro.Status.Message)
	}
	// A step in progress is written before its command is published: none is, so none went out.
	info, err := h.cmds.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		t.Fatalf("before the engine report, %d commands wait and %d are delivered, want none", info.NumPending, info.NumAckPending)
	}

	h.reportEngine("engine/available", &bus.EngineStatus{Available: true, Reason: v1alpha1.ReasonEngineAvailable, Message: "now"})
	if c := h.mustNext(); c.release != "eng-a" || c.action != v1alpha1.ActionInstall {
		t.Fatalf("first command after the engine report: %s(%s), want eng-a(Install)", c.release, c.action)
	}
	h.waitRuntime("EngineAvailable=True", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionEngineAvailable) == v1alpha1.ReasonEngineAvailable
	})
}

// TestARestartedPlannerKnowsTheEngineFromTheBus proves a planner restarted after its consumer
// acknowledged readiness's report still knows Argo CD is there: a runtime created after the
// restart (no EngineAvailable recorded on it) starts its first step at once, not after
// readiness's next periodic report. The planner reads the newest report from the events
// stream at start (Controller.Restore), under its own NATS grants in production.
func TestARestartedPlannerKnowsTheEngineFromTheBus(t *testing.T) {
	h := newHarness(t)
	h.deleteRuntime()
	stop := h.startPlanner()
	cons, err := h.js.Consumer(context.Background(), bus.StreamEvents, bus.ConsumerPlanner)
	if err != nil {
		t.Fatal(err)
	}
	err = testenv.WaitFor(context.Background(), statusTimeout, "the planner to acknowledge the engine report", func(ctx context.Context) (bool, error) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream == 0 {
			return false, fmt.Errorf("pending %d, awaiting ack %d, ack floor %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	stop = h.startPlanner()
	defer stop()
	h.createEngineRuntime()
	defer h.deleteRuntime()
	if c := h.mustNext(); c.release != "eng-a" || c.action != v1alpha1.ActionInstall {
		t.Fatalf("first command: %s(%s), want eng-a(Install)", c.release, c.action)
	}
	h.waitRuntime("EngineAvailable=True from the restored report", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionEngineAvailable) == v1alpha1.ReasonEngineAvailable
	})
}
