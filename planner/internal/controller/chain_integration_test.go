//go:build integration

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// TestLongRolloutStaysSmall rolls a chain of 80 releases out with the test acting as applier
// and readiness, restarting the planner in the middle of a batch, and checks on the API server
// that the rollout object never lists more than a batch of steps (its size does not grow with
// the rollout), that its finished steps are in immutable ConfigMaps it owns, and that every
// step reads back Succeeded with its verdict.
func TestLongRolloutStaysSmall(t *testing.T) {
	const n = 80
	h := newHarness(t)
	ctx := context.Background()
	var comps []map[string]any
	for i := range n {
		var deps []string
		if i > 0 {
			deps = []string{fmt.Sprintf("link-%02d", i-1)}
		}
		comps = append(comps, component(fmt.Sprintf("link-%02d", i), 1, deps...))
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "chain-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, comps)}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "chain-bundle"}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	stop := h.startPlanner()
	defer func() { stop() }()
	defer h.deleteRuntime()

	var rolloutName string
	largest, largestAt := 0, 0
	for i := range n {
		c := h.mustNext()
		if want := fmt.Sprintf("link-%02d", i); c.release != want {
			t.Fatalf("command %d for %s; want %s", i+1, c.release, want)
		}
		rolloutName = c.step.Rollout
		if i == 45 { // mid-batch: 32 steps in the first batch, 13 finished since
			stop()
			stop = h.startPlanner()
		}
		h.answer(c)
		stored, err := h.kube.GetRollout(ctx, rolloutName)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored.Status.Steps) > rolloutsteps.BatchSize {
			t.Fatalf("after step %d the stored rollout lists %d steps; at most %d", i+1, len(stored.Status.Steps), rolloutsteps.BatchSize)
		}
		raw, _ := json.Marshal(stored)
		if len(raw) > largest {
			largest, largestAt = len(raw), i+1
		}
	}
	h.waitRuntime("runtime Ready=True RolledOut", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
	})
	for id, k := range h.seen {
		if k > 1 {
			t.Errorf("command %s delivered %d times", id, k)
		}
	}
	stored, err := h.kube.GetRollout(ctx, rolloutName)
	if err != nil {
		t.Fatal(err)
	}
	rec := stored.Status.StepRecords
	if rec == nil || rec.FinishedBatches != n/rolloutsteps.BatchSize || stored.Status.StepCounts.Succeeded != n || stored.Status.StepCounts.Total != n {
		t.Fatalf("stored rollout: records %+v, counts %+v; want %d batches and %d steps succeeded", rec, stored.Status.StepCounts, n/rolloutsteps.BatchSize, n)
	}
	// A finished step is about 350 bytes: a rollout that held all 80 would be past 30 KiB.
	t.Logf("largest stored rollout: %d bytes, after step %d", largest, largestAt)
	if largest > 20<<10 {
		t.Fatalf("the stored rollout reached %d bytes (after step %d)", largest, largestAt)
	}
	names := []string{rec.Definitions}
	for b := int32(1); b <= rec.FinishedBatches; b++ {
		names = append(names, rolloutsteps.BatchName(rec.Definitions, b))
	}
	for _, name := range names {
		cm, err := h.core.CoreV1().ConfigMaps(rec.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Immutable == nil || !*cm.Immutable || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != stored.UID {
			t.Fatalf("ConfigMap %s: immutable %v, owners %+v; want immutable and owned by rollout %s", name, cm.Immutable, cm.OwnerReferences, stored.UID)
		}
	}
	steps, err := rolloutsteps.Expand(ctx, stored, func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		return h.core.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != n {
		t.Fatalf("%d steps read back; want %d", len(steps), n)
	}
	for i, st := range steps {
		if st.Release != fmt.Sprintf("link-%02d", i) || st.State != v1alpha1.StepSucceeded || st.Verdict == nil || !st.Verdict.Ready || st.FinishedAt == nil {
			t.Fatalf("step %d read back as %+v", i+1, st)
		}
	}
}
