//go:build e2e

package edges

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// The first test of the package (files run in name order): the runtime does not exist yet.
//
// "Delete an owned Application, or edit it, and the operator writes it again", with no active
// plan: the runtime's first install failed (a foreign Application with the last release's name
// fails its step at once), so nothing was ever rolled out, but the releases the failed install
// wrote are the stack's, at its plan. Each edit is forced back and a deleted one written again,
// from that plan, with readiness publishing no drift report (the package runs it with
// --drift-reports=false): the planner decides from the Applications.
func TestAFailedFirstInstallIsRepairedFromWhatItWrote(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	const last, edited, deleted = "dcgm-exporter", "kube-prometheus-stack", "jobset"
	foreign := &argoapp.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{Name: last, Namespace: stack.EngineNamespace,
			Labels: map[string]string{"team": "someone-else"}},
		Spec: argoapp.ApplicationSpec{
			Project:     "default",
			Source:      &argoapp.ApplicationSource{RepoURL: "oci://" + s.Repository + "/charts/cert-manager", Path: ".", TargetRevision: s.Digests["cert-manager"]},
			Destination: argoapp.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: "e2e-someone-else"},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(foreign)
	if err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	apps := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
	if _, err := apps.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: stacktest.Person}); err != nil {
		t.Fatalf("create the foreign application %s: %v", last, err)
	}
	if err := s.ApplyBundle(ctx, bundle(t, s)); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRuntime(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rt, err := s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolloutFailed)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Status.ActivePlan != "" {
		t.Fatalf("active plan %s after a failed first install, want none", rt.Status.ActivePlan)
	}
	failed, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{edited, deleted} {
		if st, _ := stacktest.FindStep(failed, r); st.State != v1alpha1.StepSucceeded {
			t.Fatalf("the failed install left %s %s, want it written and judged: %s", r, st.State, stacktest.DescribeRollout(failed))
		}
	}
	t.Logf("first install %s failed: %s", failed.Name, stacktest.Condition(rt, v1alpha1.ConditionStalled).Message)

	// A hand edit of a value: forced back to the failed install's plan.
	start := time.Now()
	stacktest.PatchApp(t, s, edited, `{"spec":{"source":{"helm":{"valuesObject":{"logLevel":"debug"}}}}}`)
	app := stacktest.WaitApp(t, s, edited, promptTimeout, "logLevel forced back", func(a *argoapp.Application) bool {
		return stacktest.Values(t, a.Spec.Source)["logLevel"] == "info"
	})
	if app.Annotations[v1alpha1.AnnotationPlanDigest] != failed.Spec.ToDigest || !strings.HasPrefix(app.Annotations[v1alpha1.AnnotationStep], "repair/") {
		t.Errorf("%s written back from plan %s by step %s; want a repair from the failed install's plan %s", edited,
			app.Annotations[v1alpha1.AnnotationPlanDigest], app.Annotations[v1alpha1.AnnotationStep], failed.Spec.ToDigest)
	}
	t.Logf("edit of %s forced back in %s", edited, time.Since(start).Round(time.Millisecond))

	// A deleted Application: written again, from the same plan.
	gone := stacktest.Application(t, s, deleted)
	start = time.Now()
	if err := apps.Delete(ctx, deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := stacktest.WaitApp(t, s, deleted, promptTimeout, "written again", func(a *argoapp.Application) bool { return a.UID != gone.UID })
	if again.Annotations[v1alpha1.AnnotationPlanDigest] != failed.Spec.ToDigest {
		t.Errorf("%s written again from plan %s, want the failed install's %s", deleted, again.Annotations[v1alpha1.AnnotationPlanDigest], failed.Spec.ToDigest)
	}
	t.Logf("deleted %s written again in %s", deleted, time.Since(start).Round(time.Millisecond))

	// Leave the runtime Ready for the tests after: the foreign Application goes, and the failed
	// rollout is deleted to try the install again.
	if err := apps.Delete(ctx, last, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Delete(ctx, failed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rolledOut(t, s)
}

// noDriftReports fails the test when readiness published a drift report: the package runs it
// with --drift-reports=false, so every repair the tests see was decided from state.
func noDriftReports(t *testing.T, s *stack.Stack) {
	t.Helper()
	js := stacktest.Observer(t, s, "e2e-edges-drift-reports")
	str, err := js.Stream(t.Context(), "AICR_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(t.Context(), jetstream.WithSubjectFilter("aicr.v1.evt.>"))
	if err != nil {
		t.Fatal(err)
	}
	var drift, verdicts uint64
	for subject, n := range info.State.Subjects {
		switch {
		case strings.HasPrefix(subject, "aicr.v1.evt.drift."):
			drift += n
		case strings.HasPrefix(subject, "aicr.v1.evt.release."):
			verdicts += n
		}
	}
	if verdicts == 0 || drift != 0 {
		t.Errorf("readiness published %d verdicts and %d drift reports; want verdicts and no drift report", verdicts, drift)
	}
}

// timed waits for cond on an Application and returns how long it took from start.
func timed(t *testing.T, s *stack.Stack, name, what string, start time.Time, cond func(*argoapp.Application) bool) (*argoapp.Application, time.Duration) {
	t.Helper()
	app := stacktest.WaitApp(t, s, name, promptTimeout, what, cond)
	return app, time.Since(start)
}

// "With no rollout in progress, the operator forces its fields back", whatever reaches it:
// readiness publishes no drift report in this package, and every edit is still forced back,
// each from the live Applications the planner watches. An edit of an annotation the plan
// decides (plan-digest, the step) is drift like one of the spec. The values edit is the one
// the test before made and saw forced back seconds ago: made again after its repair landed, it
// is new drift. The test logs how long each took: the planner's own watch makes it a check
// within the second; the resync is 10 min in this package, past every wait.
func TestEveryEditIsForcedBackWithNoDriftReport(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	ctx := t.Context()
	before := map[string]*argoapp.Application{}
	for _, n := range []string{"cert-manager", "nfd", "kube-prometheus-stack", "jobset", "kubeflow-trainer"} {
		before[n] = stacktest.Application(t, s, n)
	}
	start := time.Now()
	stacktest.PatchApp(t, s, "kube-prometheus-stack", `{"spec":{"source":{"helm":{"valuesObject":{"logLevel":"debug"}}}}}`)
	stacktest.PatchApp(t, s, "jobset", `{"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	stacktest.PatchApp(t, s, "nfd", fmt.Sprintf(`{"metadata":{"annotations":{%q:"sha256:%064d"}}}`, v1alpha1.AnnotationPlanDigest, 0))
	stacktest.PatchApp(t, s, "cert-manager", fmt.Sprintf(`{"metadata":{"annotations":{%q:"r-by-hand/1"}}}`, v1alpha1.AnnotationStep))
	if err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Delete(ctx, "kubeflow-trainer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	_, took := timed(t, s, "kube-prometheus-stack", "logLevel forced back", start, func(a *argoapp.Application) bool {
		return stacktest.Values(t, a.Spec.Source)["logLevel"] == "info"
	})
	t.Logf("values edit forced back in %s", took.Round(time.Millisecond))
	_, took = timed(t, s, "jobset", "automated sync on again", start, func(a *argoapp.Application) bool {
		sp := a.Spec.SyncPolicy
		return sp != nil && sp.Automated != nil && stacktest.True(sp.Automated.Enabled)
	})
	t.Logf("automated sync turned off forced back in %s", took.Round(time.Millisecond))
	_, took = timed(t, s, "nfd", "plan-digest forced back", start, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationPlanDigest] == rt.Status.ActivePlan
	})
	t.Logf("plan-digest edit forced back in %s", took.Round(time.Millisecond))
	app, took := timed(t, s, "cert-manager", "step annotation written by the operator again", start, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] != "r-by-hand/1"
	})
	if got := app.Annotations[v1alpha1.AnnotationStep]; !strings.HasPrefix(got, "repair/") || app.Annotations[v1alpha1.AnnotationPlanDigest] != rt.Status.ActivePlan {
		t.Errorf("cert-manager's step annotation is %q at plan %s after the edit; want a repair's from the active plan", got, app.Annotations[v1alpha1.AnnotationPlanDigest])
	}
	t.Logf("step annotation edit forced back in %s", took.Round(time.Millisecond))
	_, took = timed(t, s, "kubeflow-trainer", "written again", start, func(a *argoapp.Application) bool {
		return a.UID != before["kubeflow-trainer"].UID
	})
	t.Logf("deleted Application written again in %s", took.Round(time.Millisecond))

	// The stack is Ready again at the same plan: the repairs were judged ready.
	err := testenv.WaitFor(ctx, stepTimeout, "runtime Ready at the same plan", func(ctx context.Context) (bool, error) {
		got, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		c := stacktest.Condition(got, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionTrue || got.Status.ActivePlan != rt.Status.ActivePlan {
			return false, fmt.Errorf("Ready=%s %s at %s: %s", c.Status, c.Reason, got.Status.ActivePlan, c.Message)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	noDriftReports(t, s)
}

// runtimeEvents lists the Events about the ClusterRuntime with reason whose message names
// release, keyed by name.
func runtimeEvents(t *testing.T, s *stack.Stack, reason, release string) map[string]string {
	t.Helper()
	return plannerEvents(t, s, func(e *corev1.Event) bool {
		return e.InvolvedObject.Kind == "ClusterRuntime" && e.Reason == reason && strings.Contains(e.Message, "Application "+release+" ")
	})
}

// newEvent reports whether after holds an Event not in before, or one counted again.
func newEvent(before, after map[string]string) bool {
	for name, e := range after {
		if before[name] != e {
			return true
		}
	}
	return false
}

// "FieldOwnershipOverridden" says an edit was forced back: it is recorded once the applier
// wrote the Application back, never when the applier refused the repair. An edit made with
// the resources finalizer added by hand is refused (the finalizer makes the applier leave the
// Application alone); only the refusal is recorded. Once the finalizer goes, the repair is
// written and the Event follows.
func TestFieldOwnershipOverriddenIsRecordedOnlyAfterTheWrite(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	const release = "jobset"
	overridden := runtimeEvents(t, s, v1alpha1.EventFieldOwnershipOverridden, release)
	stacktest.PatchApp(t, s, release, fmt.Sprintf(`{"metadata":{"finalizers":[%q]},"spec":{"source":{"helm":{"valuesObject":{"replicas":3}}}}}`, v1alpha1.ArgoResourcesFinalizer))
	var refused string
	err := testenv.WaitFor(t.Context(), promptTimeout, "the repair of "+release+" refused", func(ctx context.Context) (bool, error) {
		list, err := s.Kube.CoreV1().Events(stack.OperatorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "ClusterRuntime" && strings.HasPrefix(e.Message, "repair of "+release+" refused") {
				refused = e.Reason + ": " + e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("refused: %s", refused)
	if got := runtimeEvents(t, s, v1alpha1.EventFieldOwnershipOverridden, release); newEvent(overridden, got) {
		t.Errorf("FieldOwnershipOverridden recorded for a repair the applier refused: %v", got)
	}
	if got := stacktest.Values(t, stacktest.Application(t, s, release).Spec.Source)["replicas"]; got != float64(3) {
		t.Fatalf("replicas %v while the repair is refused, want the edit left alone", got)
	}

	stacktest.PatchApp(t, s, release, `{"metadata":{"finalizers":null}}`)
	stacktest.WaitApp(t, s, release, promptTimeout, "replicas forced back once the finalizer is gone", func(a *argoapp.Application) bool {
		return stacktest.Values(t, a.Spec.Source)["replicas"] == float64(1)
	})
	err = testenv.WaitFor(t.Context(), promptTimeout, "FieldOwnershipOverridden for "+release, func(ctx context.Context) (bool, error) {
		return newEvent(overridden, runtimeEvents(t, s, v1alpha1.EventFieldOwnershipOverridden, release)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rolledOut(t, s)
}
