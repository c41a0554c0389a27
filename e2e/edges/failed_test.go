//go:build e2e

package edges

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// "Argo CD rolls nothing back on its own, and neither does the operator": after a rollout
// fails at its action timeout, the release it had written stays at its plan. A drift repair
// writes it from that plan (not the active one's old values), and the next rollout computes
// its steps from what the release holds: giving it the active plan's value back is a step.
func TestAFailedRolloutIsNeverRolledBack(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const moved, other = "kube-prometheus-stack", "jobset"
	before := stacktest.Values(t, stacktest.Application(t, s, moved).Spec.Source)["logLevel"]

	// The rollout writes moved while Argo CD's controller is held, so it is never judged ready
	// and fails at a short action timeout.
	const timeout = 30 * time.Second
	spec.Rollout.ActionTimeout = &metav1.Duration{Duration: timeout}
	t.Cleanup(func() { spec.Rollout.ActionTimeout = nil })
	release := stacktest.HoldArgoCD(t, s)
	stacktest.SetValue(t, components, moved, "logLevel", "failed-plan")
	ro := change(t, s, rt.Status.ActivePlan)
	id := stepID(ro, stacktest.StepOf(t, ro, moved, v1alpha1.ActionUpgrade))
	stacktest.WaitApp(t, s, moved, stepTimeout, "written by "+id, func(a *argoapp.Application) bool { return a.Annotations[v1alpha1.AnnotationStep] == id })
	failed := waitOutcome(t, s, ro.Name, timeout+stepTimeout)
	if failed.Status.Outcome != v1alpha1.OutcomeFailed {
		t.Fatalf("rollout %s ended %s, want RolloutFailed: %s", ro.Name, failed.Status.Outcome, stacktest.DescribeRollout(failed))
	}
	release()
	stacktest.WaitApp(t, s, moved, stepTimeout, "synced by Argo CD at the failed plan's values", func(a *argoapp.Application) bool {
		os := a.Status.OperationState
		return os != nil && os.Phase == argoapp.OperationSucceeded && os.SyncResult != nil && stacktest.Values(t, &os.SyncResult.Source)["logLevel"] == "failed-plan"
	})

	// Automated sync turned off by hand, with no rollout in flight: forced back, from the plan
	// the Application was last written from.
	stacktest.PatchApp(t, s, moved, `{"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	app := stacktest.WaitApp(t, s, moved, stepTimeout, "automated sync on again", func(a *argoapp.Application) bool {
		sp := a.Spec.SyncPolicy
		return sp != nil && sp.Automated != nil && stacktest.True(sp.Automated.Enabled)
	})
	if got := stacktest.Values(t, app.Spec.Source)["logLevel"]; got != "failed-plan" || app.Annotations[v1alpha1.AnnotationPlanDigest] != ro.Spec.ToDigest {
		t.Errorf("the repair wrote logLevel %v from plan %s; want the failed plan's failed-plan from %s (nothing is rolled back)",
			got, app.Annotations[v1alpha1.AnnotationPlanDigest], ro.Spec.ToDigest)
	}

	// The next rollout gives moved the active plan's value back, and changes another release:
	// both get a step, computed from what each holds.
	spec.Rollout.ActionTimeout = nil
	stacktest.SetValue(t, components, moved, "logLevel", before)
	stacktest.SetValue(t, components, other, "logLevel", "debug")
	next := change(t, s, rt.Status.ActivePlan)
	stacktest.StepOf(t, next, moved, v1alpha1.ActionUpgrade)
	stacktest.StepOf(t, next, other, v1alpha1.ActionUpgrade)
	if done := waitOutcome(t, s, next.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", next.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	rolledOut(t, s)
	if got := stacktest.Values(t, stacktest.Application(t, s, moved).Spec.Source)["logLevel"]; got != before {
		t.Errorf("%s logLevel %v after the next rollout, want %v", moved, got, before)
	}
}
