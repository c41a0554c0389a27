//go:build integration

package controller

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// A bundle whose plan is larger than a plan ConfigMap holds fails cleanly against the real API
// server: Sync ends without an error (nothing to retry until the bundle changes), the runtime
// says Resolved=False/ContentTooLarge with the plan's size and the limit, and neither a plan
// ConfigMap nor a rollout is written. Once the bundle shrinks, the next Sync rolls it out.
func TestPlanTooLargeFailsCleanly(t *testing.T) {
	h := newHarness(t)
	h.deleteRuntime() // an earlier test's: there is one ClusterRuntime, named cluster
	ctx := context.Background()
	big := component("huge", 1)
	big["values"] = map[string]any{"blob": strings.Repeat("x", plan.MaxPlanBytes)}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "huge-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, []map[string]any{big})}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plansBefore := h.planConfigMaps()
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "huge-bundle"}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	defer h.deleteRuntime()

	pub := &countingPublisher{}
	c := New(Config{Name: "planner", Namespace: ns, EngineNamespace: "argocd", Identities: []string{selfID}}, h.kube, pub)
	defer c.queue.ShutDown()
	c.engine = &bus.EngineStatus{Available: true} // readiness's report, which this planner has no bus for
	for i := range 2 {                            // the second Sync finds the same answer, and writes or publishes nothing new
		if err := c.Sync(ctx, h.name); err != nil {
			t.Fatalf("Sync %d of a plan too large: %v (an error is retried forever; want a terminal Resolved=False)", i+1, err)
		}
	}
	got := h.runtime()
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionResolved)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonContentTooLarge {
		t.Fatalf("Resolved condition %+v, want False/%s", cond, v1alpha1.ReasonContentTooLarge)
	}
	if !regexp.MustCompile(`the plan is 9[0-9]{5} bytes; a plan ConfigMap holds at most 921600`).MatchString(cond.Message) {
		t.Errorf("Resolved message %q does not name the plan's size and the limit", cond.Message)
	}
	if got.Status.DesiredPlan != "" {
		t.Errorf("desiredPlan %q: a plan that cannot be stored became the target", got.Status.DesiredPlan)
	}
	rollouts, err := h.kube.ListRollouts(ctx, h.name)
	if err != nil {
		t.Fatal(err)
	}
	if len(rollouts) != 0 || pub.n != 0 {
		t.Errorf("%d rollouts created and %d commands published for a plan that cannot be stored", len(rollouts), pub.n)
	}
	if after := h.planConfigMaps(); after != plansBefore {
		t.Errorf("%d plan ConfigMaps after, %d before: something of the plan was written", after, plansBefore)
	}

	// The bundle changes to one that fits: the error was terminal only until then.
	cm.Data["bundle.yaml"] = bundleYAML(t, []map[string]any{component("huge", 2)})
	if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx, h.name); err != nil {
		t.Fatal(err)
	}
	got = h.runtime()
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionResolved); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Resolved condition %+v after the bundle shrank, want True", cond)
	}
	if rollouts, err = h.kube.ListRollouts(ctx, h.name); err != nil {
		t.Fatal(err)
	}
	if len(rollouts) != 1 || pub.n != 1 {
		t.Errorf("%d rollouts and %d commands after the bundle shrank, want 1 and 1", len(rollouts), pub.n)
	}
}

// planConfigMaps counts the plan ConfigMaps of the operator namespace.
func (h *harness) planConfigMaps() int {
	h.t.Helper()
	list, err := h.core.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelRole + "=" + v1alpha1.PlanRoleValue})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(list.Items)
}
