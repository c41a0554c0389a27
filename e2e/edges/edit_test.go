//go:build e2e

package edges

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// edited is the release the hand-edit tests change: no dependencies, a value its chart reads.
const edited = "kube-prometheus-stack"

// editDuringStep starts a rollout that upgrades the edited release to logLevel planned and,
// while its step is in flight, edits the Application's logLevel to "debug" by hand. Argo CD's
// controller is held while the step writes, so the edit lands inside the step; then Argo CD
// compares the edited spec, syncs it (automated, selfHeal) and finds it healthy. It returns
// the rollout and the step's ID once the step's recorded verdict judged the synced edit.
func editDuringStep(t *testing.T, planned string) (*v1alpha1.RuntimeRollout, string) {
	t.Helper()
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	release := stacktest.HoldArgoCD(t, s)
	stacktest.SetValue(t, components, edited, "logLevel", planned)
	ro := change(t, s, rt.Status.ActivePlan)
	id := stepID(ro, stacktest.StepOf(t, ro, edited, v1alpha1.ActionUpgrade))
	written := stacktest.WaitApp(t, s, edited, stepTimeout, "written by step "+id, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == id
	})
	if got := stacktest.Values(t, written.Spec.Source)["logLevel"]; got != planned {
		t.Fatalf("step %s wrote logLevel %v, want %s", id, got, planned)
	}
	stacktest.PatchApp(t, s, edited, `{"spec":{"source":{"helm":{"valuesObject":{"logLevel":"debug"}}}}}`)
	release()

	synced := stacktest.WaitApp(t, s, edited, stepTimeout, "the edit synced by Argo CD and Healthy", func(a *argoapp.Application) bool {
		os := a.Status.OperationState
		return a.Operation == nil && os != nil && os.Phase == argoapp.OperationSucceeded && os.SyncResult != nil &&
			stacktest.Values(t, &os.SyncResult.Source)["logLevel"] == "debug" && a.Status.Sync.Status == argoapp.SyncStatusCodeSynced &&
			a.Status.Health.Status == argoapp.HealthStatusHealthy
	})
	t.Logf("Argo CD synced the edit: %s", stacktest.DescribeApp(synced))
	// Readiness judged the synced, healthy edit (its verdict says so) and the step did not pass.
	ro = waitStep(t, s, ro.Name, edited, promptTimeout, "SpecDrifted, not ready on the synced, healthy edit", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.State != v1alpha1.StepInProgress {
			return fmt.Errorf("%w: the step is %s (%s): a hand edit passed it", errStop, st.State, st.Message)
		}
		f := fence(st.Verdict, v1alpha1.FenceComparedToSpec)
		if st.Reason != v1alpha1.ReasonSpecDrifted || st.Verdict == nil || st.Verdict.Ready ||
			!has(f.Message, "helm.valuesObject (edited by hand", "Argo CD compared the edit: Synced", "health Healthy, its sync Succeeded") {
			return fmt.Errorf("reason %q, verdict %+v", st.Reason, st.Verdict)
		}
		return nil
	})
	st, _ := stacktest.FindStep(ro, edited)
	t.Logf("held: %s %s: %s; ComparedToSpec: %s", st.State, st.Reason, st.Message, fence(st.Verdict, v1alpha1.FenceComparedToSpec).Message)
	got, err := s.Runtime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c := stacktest.Condition(got, v1alpha1.ConditionStalled); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonSpecDrifted ||
		!has(c.Message, edited, ".spec.source.helm.valuesObject.logLevel") {
		t.Errorf("runtime Stalled=%s %s: %q; want True SpecDrifted naming %s and the edited field", c.Status, c.Reason, c.Message, edited)
	}
	if c := stacktest.Condition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRollingOut {
		t.Errorf("runtime Ready=%s %s, want False RollingOut", c.Status, c.Reason)
	}
	return ro, id
}

// "An edit of the release whose step is in flight stays SpecDrifted": a hand edit that Argo CD
// synced and found healthy never passes the step; undoing it lets the step finish with the
// plan's values.
func TestHandEditOfTheInFlightReleaseNeverPassesItsStep(t *testing.T) {
	s := stacktest.Need(t)
	ro, id := editDuringStep(t, "warn")
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")

	undone := stacktest.PatchApp(t, s, edited, `{"spec":{"source":{"helm":{"valuesObject":{"logLevel":"warn"}}}}}`)
	done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout)
	if done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s after the edit was undone: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	ev, st := rollouts.FirstStep(t, ro.Name, edited, func(st v1alpha1.Step) bool { return st.State == v1alpha1.StepSucceeded })
	if ev.RV <= rv(t, undone.ResourceVersion) {
		t.Errorf("step %s succeeded at resourceVersion %d, before the edit was undone (%s)", id, ev.RV, undone.ResourceVersion)
	}
	if st.Verdict == nil || !st.Verdict.Ready || rv(t, st.Verdict.ResourceVersion) <= rv(t, undone.ResourceVersion) {
		t.Errorf("step %s succeeded on verdict %+v, not one judged after the undo (%s)", id, st.Verdict, undone.ResourceVersion)
	}
	rt := rolledOut(t, s)
	app := stacktest.WaitApp(t, s, edited, stepTimeout, "Synced/Healthy at the plan's values", func(a *argoapp.Application) bool {
		return a.Status.Sync.Status == argoapp.SyncStatusCodeSynced && a.Status.Health.Status == argoapp.HealthStatusHealthy
	})
	if got := stacktest.Values(t, app.Spec.Source)["logLevel"]; got != "warn" || rt.Status.ActivePlan != ro.Spec.ToDigest {
		t.Errorf("after the rollout: logLevel %v, active plan %s; want the plan's warn at %s", got, rt.Status.ActivePlan, ro.Spec.ToDigest)
	}
}

// An edit of the release in flight that is not undone fails the rollout at its action timeout,
// with the drift named in the condition; then, with no rollout in progress, the edit is forced
// back to the failed plan's values (nothing is rolled back).
func TestHandEditNotUndoneFailsTheRolloutAtTheActionTimeout(t *testing.T) {
	s := stacktest.Need(t)
	const timeout = 60 * time.Second
	spec.Rollout.ActionTimeout = &metav1.Duration{Duration: timeout}
	t.Cleanup(func() { spec.Rollout.ActionTimeout = nil })
	ro, id := editDuringStep(t, "error")

	failed := waitOutcome(t, s, ro.Name, timeout+stepTimeout)
	st, _ := stacktest.FindStep(failed, edited)
	if failed.Status.Outcome != v1alpha1.OutcomeFailed || st.State != v1alpha1.StepFailed {
		t.Fatalf("rollout %s ended %s with step %s %s; want RolloutFailed at the action timeout: %s", ro.Name, failed.Status.Outcome, id, st.State, stacktest.DescribeRollout(failed))
	}
	rt, err := s.WaitCondition(t.Context(), promptTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolloutFailed)
	if err != nil {
		t.Fatal(err)
	}
	c := stacktest.Condition(rt, v1alpha1.ConditionStalled)
	if !has(c.Message, ro.Name, edited, "SpecDrifted", "Values: .spec.source.helm.valuesObject.logLevel", "action timeout 1m0s") {
		t.Errorf("Stalled message %q does not name the rollout, the release, SpecDrifted, the edited field and the timeout", c.Message)
	}
	t.Logf("Stalled=True RolloutFailed: %s", c.Message)
	// No rollout is in progress now, so the edit that stood through the failure is forced back,
	// to the failed plan's value: nothing is rolled back to the active plan's, and no new
	// report of the edit comes (the package's readiness publishes none at all).
	app := stacktest.WaitApp(t, s, edited, promptTimeout, "the edit forced back after the failure", func(a *argoapp.Application) bool {
		return stacktest.Values(t, a.Spec.Source)["logLevel"] != "debug"
	})
	if got := stacktest.Values(t, app.Spec.Source)["logLevel"]; got != "error" || app.Annotations[v1alpha1.AnnotationPlanDigest] != failed.Spec.ToDigest {
		t.Errorf("after the failure logLevel %v from plan %s; want the failed plan's error from %s (forced back, never rolled back)",
			got, app.Annotations[v1alpha1.AnnotationPlanDigest], failed.Spec.ToDigest)
	}
	t.Logf("forced back %s after the rollout failed (%s)", time.Since(failed.Status.FinishedAt.Time).Round(time.Millisecond), stacktest.DescribeApp(app))

	// A new plan moves the release again: its step writes the plan's values over the edit.
	spec.Rollout.ActionTimeout = nil
	stacktest.SetValue(t, components, edited, "logLevel", "info")
	next := change(t, s, rt.Status.ActivePlan)
	stacktest.StepOf(t, next, edited, v1alpha1.ActionUpgrade)
	if done := waitOutcome(t, s, next.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", next.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	rolledOut(t, s)
	if got := stacktest.Values(t, stacktest.Application(t, s, edited).Spec.Source)["logLevel"]; got != "info" {
		t.Errorf("logLevel %v after the next rollout, want info", got)
	}
}
