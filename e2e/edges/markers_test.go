//go:build e2e

package edges

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// "Operator markers are never taken on trust": whether the engine is suspended comes from the
// runtime's spec, not from the engine-suspended annotation. Automated sync turned off by hand
// together with a hand-set engine-suspended marker is drift like any other, and repaired.
func TestAHandSetEngineSuspendedMarkerDoesNotHideDisabledAutomatedSync(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel = "cert-manager"
	stacktest.PatchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationEngineSuspended+`":"true"}},"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	app := stacktest.WaitApp(t, s, rel, stepTimeout, "automated sync enabled again by the operator", func(a *argoapp.Application) bool {
		sp := a.Spec.SyncPolicy
		return sp != nil && sp.Automated != nil && stacktest.True(sp.Automated.Enabled)
	})
	if !stacktest.True(app.Spec.SyncPolicy.Automated.Prune) || !stacktest.True(app.Spec.SyncPolicy.Automated.SelfHeal) {
		t.Errorf("repaired sync policy %+v lost prune or selfHeal", app.Spec.SyncPolicy.Automated)
	}
	got, err := s.WaitCondition(t.Context(), stepTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ActivePlan != rt.Status.ActivePlan || got.Spec.SuspendEngine {
		t.Errorf("the repair moved the runtime: plan %s (was %s), suspendEngine %v", got.Status.ActivePlan, rt.Status.ActivePlan, got.Spec.SuspendEngine)
	}
}

// "Operator markers are never taken on trust", the delete-rollout marker: whether a Remove is in
// progress comes from the rollout. Hand-set on a ready release's Application (with the resources
// finalizer, so the repair is held back and the marker stays), it hides nothing: the admission
// webhook still refuses the operator's writes (the marker names no rollout removing the
// release), and the release's verdicts still flow (its pods gone, the runtime turns
// Ready=False/NotReady naming it). Once the finalizer is removed by hand, the marker is repaired
// like any other drift and the runtime is Ready again.
func TestAHandSetDeleteRolloutMarkerIsDriftAndHidesNothing(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	const rel, ns, marker = "jobset", "jobset-system", "r-by-hand"
	armed := stacktest.PatchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationDeleteRollout+`":"`+marker+`"},"finalizers":["`+v1alpha1.ArgoResourcesFinalizer+`"]}}`)
	if armed.Annotations[v1alpha1.AnnotationDeleteRollout] != marker || !slices.Contains(armed.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		t.Fatalf("the hand edit was not stored: annotations %v, finalizers %v", armed.Annotations, armed.Finalizers)
	}
	t.Cleanup(func() { // leave the Application as the operator wrote it, whatever happened
		_, _ = s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Patch(context.Background(), rel, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null,"annotations":{"`+v1alpha1.AnnotationDeleteRollout+`":null}}}`), metav1.PatchOptions{FieldManager: stacktest.Person})
	})

	// The webhook refuses a write by an operator identity (the applier's): the marker names no
	// rollout removing the release, so the finalizer is a person's.
	cfg := s.Env.ConfigFor(stack.Identity("applier"), "system:serviceaccounts", "system:serviceaccounts:"+stack.OperatorNamespace, "system:authenticated")
	applier, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = applier.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Patch(ctx, rel, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"operator.aicr.run/e2e-probe":"x"}}}`), metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
	want := v1alpha1.AnnotationDeleteRollout + "=" + marker + ", but rollout " + marker + " does not exist"
	if err == nil || !strings.Contains(err.Error(), "may not write or delete it") || !strings.Contains(err.Error(), want) {
		t.Fatalf("a write as %s to the Application with a hand-set marker and the finalizer: err %v, want the webhook's denial saying %q", stack.Identity("applier"), err, want)
	}
	t.Logf("webhook: %v", err)

	// Its verdicts still flow: the release's pods gone and unschedulable, the runtime turns
	// NotReady naming it.
	uncordon := unschedule(t, s, ns, rel)
	got, err := s.WaitCondition(ctx, promptTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotReady)
	if err != nil {
		t.Fatalf("%v (a hand-set %s must not silence the release's verdicts)", err, v1alpha1.AnnotationDeleteRollout)
	}
	if c := stacktest.Condition(got, v1alpha1.ConditionReady); !has(c.Message, "release "+rel+" is not ready") {
		t.Errorf("Ready message %q does not name %s", c.Message, rel)
	}
	if during := stacktest.Application(t, s, rel); during.Annotations[v1alpha1.AnnotationDeleteRollout] != marker {
		t.Fatalf("the marker went while the finalizer was on: %v", during.Annotations)
	}
	uncordon()

	// The finalizer removed by hand: the marker is drift, and the repair takes it away.
	stacktest.PatchApp(t, s, rel, `{"metadata":{"finalizers":null}}`)
	stacktest.WaitApp(t, s, rel, stepTimeout, "without the hand-set marker", func(a *argoapp.Application) bool {
		_, marked := a.Annotations[v1alpha1.AnnotationDeleteRollout]
		return !marked && len(a.Finalizers) == 0
	})
	back, err := s.WaitCondition(ctx, stepTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.ActivePlan != rt.Status.ActivePlan {
		t.Errorf("active plan %s after the repair, want %s", back.Status.ActivePlan, rt.Status.ActivePlan)
	}
	if _, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, rel, metav1.GetOptions{}); err != nil {
		t.Errorf("the Application is gone after the repair: %v", err)
	}
}
