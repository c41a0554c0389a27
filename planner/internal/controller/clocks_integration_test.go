//go:build integration

package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// skewedClock is the real clock off by a fixed offset: a planner replica on a node whose clock
// is wrong.
type skewedClock struct {
	clock.RealClock
	offset time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.RealClock.Now().Add(c.offset) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestTwoPlannersWithClocksApart: one planner replica whose clock runs 5 s ahead starts the
// first rollout, and after it another replica whose clock runs 5 s behind starts the next.
// The second rollout's step starts, by its planner's clock, up to 10 s before the first's did,
// yet its command carries the larger ordering token (the applier orders by the tokens, never
// the starts: appwriter's TestIntegrationClocksApartDoNotReorderCommands).
func TestTwoPlannersWithClocksApart(t *testing.T) {
	h := newHarness(t)
	h.deleteRuntime() // an earlier test's: there is one ClusterRuntime, named cluster
	ctx := context.Background()
	v1 := []map[string]any{component("cert-manager", 1)}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "clocks-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, v1)}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.core.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: cm.Name}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}

	h.clock = skewedClock{offset: 5 * time.Second}
	stop := h.startPlanner()
	first := h.mustNext()
	h.answer(first)
	h.waitRuntime("runtime Ready=True RolledOut", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
	})
	stop()

	h.clock = skewedClock{offset: -5 * time.Second}
	stop = h.startPlanner()
	defer stop()
	defer h.deleteRuntime() // while the planner runs: it removes its finalizer
	cm, err := h.core.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["bundle.yaml"] = bundleYAML(t, []map[string]any{component("cert-manager", 2)})
	if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := h.mustNext()
	if second.step.Rollout == first.step.Rollout || second.action != v1alpha1.ActionUpgrade {
		t.Fatalf("second command %s (%s) of rollout %s; want the next rollout's Upgrade", second.msgID, second.action, second.step.Rollout)
	}
	cmp, ok := v1alpha1.CompareSeq(second.step.Seq, first.step.Seq)
	if !ok || cmp <= 0 {
		t.Errorf("the later rollout's command carries seq %q, the earlier's %q: want it after", second.step.Seq, first.step.Seq)
	}
	t.Logf("starts by the planners' clocks: first %s, second %s; seqs %s, %s",
		first.step.Started.Format(time.RFC3339Nano), second.step.Started.Format(time.RFC3339Nano), first.step.Seq, second.step.Seq)
}
