//go:build integration

package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// TestHistoryIsKeptToTheLimit rolls five plans out one after another with
// spec.rollout.historyLimit 2, the test acting as applier and readiness, and proves retention on
// the real API server: the three oldest rollouts are deleted, the two newest stay; of the plans,
// those the rollouts left name stay, the one an owned Application still carries in its
// plan-digest annotation stays though no rollout names it any more, and the other is deleted;
// the runtime records it with a HistoryPruned Event.
func TestHistoryIsKeptToTheLimit(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deleteRuntime() // an earlier test's: there is one ClusterRuntime, named cluster
	argo, err := argoapp.NewForConfig(h.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	owned := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).String()
	h.apps = argo.Applications(testenv.ArgoCDNamespace).ListWatch(owned)
	if _, err := h.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.ArgoCDNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	version := func(v int) []map[string]any { return []map[string]any{component("hist-a", v)} }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "history-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, version(1))}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	setBundle := func(v int) {
		t.Helper()
		cm, err := h.core.CoreV1().ConfigMaps(ns).Get(ctx, "history-bundle", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["bundle.yaml"] = bundleYAML(t, version(v))
		if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setBundle(1)
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle:  v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "history-bundle"}},
		Rollout: v1alpha1.RolloutSettings{HistoryLimit: 2},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	// The Applications' informer must sync for plans to be pruned: wait until the API serves
	// them (the CRD is installed with the environment), so its first list does not back off.
	err = testenv.WaitFor(ctx, statusTimeout, "Applications listable", func(ctx context.Context) (bool, error) {
		_, err := argo.Applications(testenv.ArgoCDNamespace).List(ctx, metav1.ListOptions{LabelSelector: owned})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := h.startPlanner()
	defer func() { stop() }()
	defer h.deleteRuntime()

	// The test writes no Application, so the drift loop's repairs of the missing ones are on the
	// bus too: the rollout's step is the command that names a rollout.
	nextStep := func() *command {
		t.Helper()
		for {
			if c := h.mustNext(); c.step.Rollout != "" {
				return c
			}
		}
	}
	var plans, rollouts []string
	for v := 1; v <= 5; v++ {
		if v > 1 {
			setBundle(v)
		}
		h.answer(nextStep())
		got := h.waitRuntime(fmt.Sprintf("Ready at plan %d", v), func(rt *v1alpha1.ClusterRuntime) bool {
			return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut && rt.Status.ActivePlan == rt.Status.DesiredPlan &&
				!slices.Contains(plans, rt.Status.ActivePlan)
		})
		plans, rollouts = append(plans, got.Status.ActivePlan), append(rollouts, got.Status.Rollout)
		if v == 1 {
			// An owned Application still written from the first plan: the plan stays while it is.
			app := fmt.Sprintf(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"hist-old","labels":{%q:%q},"annotations":{%q:%q}},`+
				`"spec":{"project":"default","destination":{"server":"https://kubernetes.default.svc","namespace":"hist"},"source":{"repoURL":"oci://example/charts","chart":"hist","targetRevision":"1.0.0"}}}`,
				v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue, v1alpha1.AnnotationPlanDigest, got.Status.ActivePlan)
			if _, err := argo.Applications(testenv.ArgoCDNamespace).Create(ctx, []byte(app), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = argo.Applications(testenv.ArgoCDNamespace).Delete(ctx, "hist-old", metav1.DeleteOptions{}) }()
		}
	}

	wantRollouts, wantPlans := rollouts[3:], []string{plans[0], plans[2], plans[3], plans[4]}
	slices.Sort(wantRollouts)
	slices.Sort(wantPlans)
	var haveRollouts, havePlans []string
	err = testenv.WaitFor(ctx, statusTimeout, "history pruned to the limit", func(ctx context.Context) (bool, error) {
		rs, err := h.kube.ListRollouts(ctx, h.name)
		if err != nil {
			return false, err
		}
		haveRollouts = haveRollouts[:0]
		for _, r := range rs {
			haveRollouts = append(haveRollouts, r.Name)
		}
		cms, err := h.kube.ListPlans(ctx, ns)
		if err != nil {
			return false, err
		}
		havePlans = havePlans[:0]
		for _, cm := range cms {
			if d := cm.Annotations[v1alpha1.AnnotationPlanDigest]; slices.Contains(plans, d) { // other tests' plans aside
				havePlans = append(havePlans, d)
			}
		}
		slices.Sort(haveRollouts)
		slices.Sort(havePlans)
		return slices.Equal(haveRollouts, wantRollouts) && slices.Equal(havePlans, wantPlans), nil
	})
	if err != nil {
		t.Fatalf("%v\nrollouts %v, want %v\nplans %v, want %v (plan 2 deleted; plan 1 kept for the Application)", err, haveRollouts, wantRollouts, havePlans, wantPlans)
	}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Get(ctx, plan.ConfigMapName(plans[1]), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("plan 2's ConfigMap: %v, want NotFound", err)
	}
	err = testenv.WaitFor(ctx, statusTimeout, "a HistoryPruned Event on the runtime", func(ctx context.Context) (bool, error) {
		evs, err := h.core.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + EventHistoryPruned})
		return err == nil && len(evs.Items) > 0, err
	})
	if err != nil {
		t.Error(err)
	}
}
