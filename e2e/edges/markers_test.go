//go:build e2e

package edges

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// "Operator markers are never taken on trust": whether the engine is suspended comes from the
// runtime's spec, not from the engine-suspended annotation. Automated sync turned off by hand
// together with a hand-set engine-suspended marker is drift like any other, and repaired.
func TestAHandSetEngineSuspendedMarkerDoesNotHideDisabledAutomatedSync(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel = "cert-manager"
	patchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationEngineSuspended+`":"true"}},"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	app := waitApp(t, s, rel, stepTimeout, "automated sync enabled again by the operator", func(a *argoapp.Application) bool {
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
