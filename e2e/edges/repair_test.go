//go:build e2e

package edges

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// "With no rollout in progress, the operator forces its fields back", for fields nobody
// states: a hand edit that adds to the Application (source.chart, a values key, a
// revisionHistoryLimit, a plan-decided annotation the plan does not state) is repaired until
// the Application is exactly the plan's; the operator's apply alone would leave them, since it
// removes only fields it owned. An annotation no plan decides stays.
func TestARepairRemovesWhatAHandEditAdded(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel = "cert-manager"
	before := stacktest.Application(t, s, rel)
	edited := stacktest.PatchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationReadinessGate+`":"true","example.com/note":"kept"}},`+
		`"spec":{"revisionHistoryLimit":3,"source":{"chart":"by-hand","helm":{"valuesObject":{"addedByHand":true}}}}}`)
	if edited.Spec.Source.Chart != "by-hand" || edited.Spec.RevisionHistoryLimit == nil {
		t.Fatalf("the hand edit was not stored: %+v", edited.Spec)
	}
	repaired := stacktest.WaitApp(t, s, rel, stepTimeout, "exactly the plan's again", func(a *argoapp.Application) bool {
		_, gate := a.Annotations[v1alpha1.AnnotationReadinessGate]
		_, added := stacktest.Values(t, a.Spec.Source)["addedByHand"]
		return a.Spec.Source.Chart == "" && a.Spec.RevisionHistoryLimit == nil && !added && !gate
	})
	if d := cmp.Diff(before.Spec, repaired.Spec); d != "" {
		t.Errorf("spec after the repair differs from the one the rollout wrote (-rollout +repaired):\n%s", d)
	}
	if repaired.Annotations["example.com/note"] != "kept" {
		t.Errorf("an annotation no plan decides was removed: %v", repaired.Annotations)
	}
	got, err := s.WaitCondition(t.Context(), stepTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ActivePlan != rt.Status.ActivePlan {
		t.Errorf("the repair moved the runtime: plan %s (was %s)", got.Status.ActivePlan, rt.Status.ActivePlan)
	}
}
