//go:build e2e

package edges

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// "A sync or reconcile happened after the step began": an upgrade whose new values render the
// same manifests (a key the chart does not read) leaves Argo CD nothing to sync. Its step
// passes on Argo CD's comparison of the written spec, without a sync operation.
func TestAnUpgradeThatRendersTheSameManifestsPassesOnTheComparison(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel = "nodewright-customizations"
	before := stacktest.Application(t, s, rel)
	if before.Status.OperationState == nil {
		t.Fatalf("%s has no last sync: %s", rel, stacktest.DescribeApp(before))
	}
	stacktest.SetValue(t, components, rel, "notReadByTheChart", "e2e")
	ro := change(t, s, rt.Status.ActivePlan)
	id := stepID(ro, stacktest.StepOf(t, ro, rel, v1alpha1.ActionUpgrade))

	done := waitStep(t, s, ro.Name, rel, stepTimeout, "Succeeded", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.State != v1alpha1.StepSucceeded {
			return fmt.Errorf("step %s: %s %s (%s)", id, st.State, st.Reason, st.Message)
		}
		return nil
	})
	st, _ := stacktest.FindStep(done, rel)
	if f := fence(st.Verdict, v1alpha1.FenceSyncedAfterStep); f.State != v1alpha1.FencePassed {
		t.Errorf("step %s SyncedAfterStep %s", id, f.State)
	}
	app := stacktest.Application(t, s, rel)
	if app.Annotations[v1alpha1.AnnotationStep] != id || app.Annotations[v1alpha1.AnnotationStepWrite] != v1alpha1.StepWriteChanged {
		t.Errorf("%s annotations %v: want step %s written changed", rel, app.Annotations, id)
	}
	// Argo CD compared the new values and ran no sync: the last operation is the one from
	// before the step.
	if got := stacktest.Values(t, &app.Status.Sync.ComparedTo.Source)["notReadByTheChart"]; got != "e2e" {
		t.Errorf("comparedTo values lack the new key: %s", stacktest.DescribeApp(app))
	}
	if os := app.Status.OperationState; os == nil || !os.StartedAt.Equal(&before.Status.OperationState.StartedAt) {
		t.Errorf("a sync ran for a write that changes no manifest: operation %+v (before: started %s)", os, before.Status.OperationState.StartedAt)
	}
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	rolledOut(t, s)
}

// An Application deleted by hand during a rollout, whose resources stay, is written again by
// its step as a new Application over resources that already match: Argo CD compares it
// Synced and starts no sync, and the step passes on that comparison.
func TestAnApplicationWrittenAgainOverMatchingResourcesPassesOnTheComparison(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	const rel = "nodewright-customizations"
	old := stacktest.Application(t, s, rel)

	// A rollout in flight that has started no step: paused (before the bundle changes, or the
	// planner starts the step at once), then a value the chart does not read, so the resources
	// the step installs are the ones that exist.
	spec.Paused = true
	t.Cleanup(func() { spec.Paused = false })
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.ApplyRuntime(ctx, spec) }); err != nil {
		t.Fatal(err)
	}
	stacktest.SetValue(t, components, rel, "notReadByTheChart", "e2e-again")
	ro := change(t, s, rt.Status.ActivePlan)
	st := stacktest.StepOf(t, ro, rel, v1alpha1.ActionUpgrade)
	if st.StartedAt != nil {
		t.Fatalf("step %s started while the runtime is paused", stepID(ro, st))
	}
	id := stepID(ro, st)
	if err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Delete(ctx, rel, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete application %s: %v", rel, err)
	}
	err := testenv.WaitFor(ctx, stepTimeout, "application "+rel+" gone", func(ctx context.Context) (bool, error) {
		_, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, rel, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spec.Paused = false
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.ApplyRuntime(ctx, spec) }); err != nil {
		t.Fatal(err)
	}

	waitStep(t, s, ro.Name, rel, stepTimeout, "Succeeded", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.State != v1alpha1.StepSucceeded {
			return fmt.Errorf("step %s: %s %s (%s)", id, st.State, st.Reason, st.Message)
		}
		return nil
	})
	app := stacktest.Application(t, s, rel)
	if app.UID == old.UID || app.Annotations[v1alpha1.AnnotationStep] != id {
		t.Errorf("%s: uid %s (was %s), step %s; want a new Application written by %s", rel, app.UID, old.UID, app.Annotations[v1alpha1.AnnotationStep], id)
	}
	if app.Status.OperationState != nil {
		t.Errorf("a sync ran over resources that already matched: %+v", app.Status.OperationState)
	}
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	rolledOut(t, s)
}

// "Delete an owned Application and the operator writes it again", during its step: the step
// wrote it (Argo CD's controller held, so it cannot pass yet), then it is deleted by hand. No
// drift report comes (readiness publishes none in this package), and the step's command was
// answered; the planner's drift check sees the step's Application gone and sends the step's
// command again, which creates it. Once Argo CD runs, the step passes on the new Application.
func TestAnApplicationDeletedDuringItsStepIsWrittenAgainByTheStep(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	const rel = "cert-manager"
	release := stacktest.HoldArgoCD(t, s)
	stacktest.SetValue(t, components, rel, "deletedDuringItsStep", "yes")
	ro := change(t, s, rt.Status.ActivePlan)
	id := stepID(ro, stacktest.StepOf(t, ro, rel, v1alpha1.ActionUpgrade))
	first := stacktest.WaitApp(t, s, rel, stepTimeout, "written by "+id, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == id
	})
	if err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Delete(ctx, rel, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete application %s: %v", rel, err)
	}
	again := stacktest.WaitApp(t, s, rel, promptTimeout, "written again by "+id, func(a *argoapp.Application) bool {
		return a.UID != first.UID && a.Annotations[v1alpha1.AnnotationStep] == id
	})
	if got := stacktest.Values(t, again.Spec.Source)["deletedDuringItsStep"]; got != "yes" || again.Annotations[v1alpha1.AnnotationPlanDigest] != ro.Spec.ToDigest {
		t.Errorf("%s written again with deletedDuringItsStep %v at plan %s; want the step's values at %s", rel, got, again.Annotations[v1alpha1.AnnotationPlanDigest], ro.Spec.ToDigest)
	}
	release()
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	if got := stacktest.Application(t, s, rel); got.UID != again.UID {
		t.Errorf("%s is %s after the rollout, want the Application the step wrote again (%s)", rel, got.UID, again.UID)
	}
	noDriftReports(t, s)
	rolledOut(t, s)
}

// The engine-policy move from argocd.v1 (comparison exceptions in argocd-cm, none on the
// Applications), as an upgrade: the older operator's planner is gone, its argocd-cm keys stand
// (written by its field manager, aicr-operator-customizations) and so do its Applications, as
// its own field manager applied them, without ignoreDifferences and compared so by Argo CD; the
// new planner starts with readiness running. Its drift loop leaves them to the move: one EnginePolicyChanged rollout writes every
// release again with only ignoreDifferences added, needs no approval, and no
// FieldOwnershipOverridden is recorded. The status from before the write matches the source,
// sync result and health of the new spec; only comparedTo's ignoreDifferences can tell. With
// Argo CD's controller held, no step passes; once it compares, every step does, each after the
// comparison that shows the new exceptions.
func TestAnIgnoreDifferencesOnlyWriteWaitsForAFreshComparison(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	var err error
	overridden := reasonEvents(t, s, v1alpha1.EventFieldOwnershipOverridden)
	before := rolloutUIDs(t, s)

	// The older operator's argocd-cm keys and Applications, with no planner of the new one
	// running yet.
	startPlanner := stopPlanner(t, s)
	olderCustomizations(t, s)
	for _, c := range components {
		olderOperatorWrite(t, s, c.Name)
		stacktest.WaitApp(t, s, c.Name, stepTimeout, "compared without comparison exceptions", func(a *argoapp.Application) bool {
			return len(a.Spec.IgnoreDifferences) == 0 && len(a.Status.Sync.ComparedTo.IgnoreDifferences) == 0 &&
				a.Status.Sync.Status == argoapp.SyncStatusCodeSynced && a.Status.Health.Status == argoapp.HealthStatusHealthy
		})
	}
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")
	release := stacktest.HoldArgoCD(t, s)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).Get(ctx, v1alpha1.RuntimeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.Object["status"].(map[string]any)["enginePolicy"] = "argocd.v1"
		_, err = s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("record engine policy argocd.v1: %v", err)
	}
	startPlanner() // the upgrade
	var ro *v1alpha1.RuntimeRollout
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the EnginePolicyChanged rollout", func(ctx context.Context) (bool, error) {
		got, err := s.Runtime(ctx)
		if err != nil || got.Status.Rollout == rt.Status.Rollout {
			return false, err
		}
		r, err := s.Rollout(ctx, got.Status.Rollout)
		if err != nil {
			return false, err
		}
		ro = r
		return r.Spec.Reason == v1alpha1.RolloutReasonEnginePolicyChanged && len(r.Status.Steps) == len(components), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	first := ro.Status.Steps[0]
	id := stepID(ro, first)
	stacktest.WaitApp(t, s, first.Release, stepTimeout, "written by "+id+" with only ignoreDifferences changed", func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == id && a.Annotations[v1alpha1.AnnotationStepWrite] == v1alpha1.StepWriteChanged && len(a.Spec.IgnoreDifferences) > 0
	})
	// Readiness judged the written spec against the stale status and did not pass it.
	waitStep(t, s, ro.Name, first.Release, promptTimeout, "judged, not ready until Argo CD compares the new exceptions", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.State != v1alpha1.StepInProgress {
			return fmt.Errorf("%w: the step is %s (%s): it passed on the status from before its write", errStop, st.State, st.Message)
		}
		if f := fence(st.Verdict, v1alpha1.FenceComparedToSpec); st.Verdict == nil || f.State != v1alpha1.FenceOpen || !has(f.Message, "comparedTo differs in ignoreDifferences") {
			return fmt.Errorf("verdict %+v", st.Verdict)
		}
		return nil
	})
	release()
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	got := rolledOut(t, s)
	if got.Status.EnginePolicy != v1alpha1.EnginePolicyArgoCDV2 {
		t.Errorf("engine policy %q after the move, want %s", got.Status.EnginePolicy, v1alpha1.EnginePolicyArgoCDV2)
	}
	var made []string
	for uid, name := range rolloutUIDs(t, s) {
		if _, ok := before[uid]; !ok {
			made = append(made, name)
		}
	}
	if len(made) != 1 || made[0] != ro.Name {
		t.Errorf("the upgrade made rollouts %v, want one: %s", made, ro.Name)
	}
	if done, err := s.Rollout(ctx, ro.Name); err != nil || done.Spec.Approval != nil {
		t.Errorf("the move was approved (%v): %+v", err, done.Spec.Approval)
	}
	if got := reasonEvents(t, s, v1alpha1.EventFieldOwnershipOverridden); newEvent(overridden, got) {
		t.Errorf("FieldOwnershipOverridden recorded during the upgrade: %v", got)
	}
	for _, st := range ro.Status.Steps {
		compared, _, ok := apps.FirstApp(t, st.Release, func(a *argoapp.Application) bool {
			return a.Annotations[v1alpha1.AnnotationStep] == stepID(ro, st) && len(a.Status.Sync.ComparedTo.IgnoreDifferences) > 0
		})
		if !ok {
			t.Errorf("%s: no recorded comparison of its step's exceptions", st.Release)
			continue
		}
		ev, _ := rollouts.FirstStep(t, ro.Name, st.Release, func(s v1alpha1.Step) bool { return s.State == v1alpha1.StepSucceeded })
		if ev.RV <= compared.RV {
			t.Errorf("%s: step succeeded at rv %d, before Argo CD compared the new exceptions (rv %d)", st.Release, ev.RV, compared.RV)
		}
	}
}

// olderCustomizationsManager is the field manager an operator before the argocd.v2 engine
// policy wrote its argocd-cm keys with (docs/argocd.md).
const olderCustomizationsManager = "aicr-operator-customizations"

// olderCustomizations applies argocd-cm's keys as an operator before argocd.v2 wrote them: the
// comparison exceptions by kind (a key per group and kind cannot name the Secret, so it covers
// every Secret's data). The test's cleanup applies them away (the upgrade leaves them: the docs
// tell the user to remove them).
func olderCustomizations(t *testing.T, s *stack.Stack) {
	t.Helper()
	apply := func(data map[string]string) error {
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-cm", "namespace": stack.EngineNamespace}}
		if data != nil {
			cm["data"] = data
		}
		body, err := json.Marshal(cm)
		if err != nil {
			return err
		}
		force := true
		_, err = s.Kube.CoreV1().ConfigMaps(stack.EngineNamespace).Patch(context.Background(), "argocd-cm", types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: olderCustomizationsManager, Force: &force})
		return err
	}
	if err := apply(map[string]string{
		"resource.customizations.ignoreDifferences.Secret":                   "jsonPointers:\n- /data\n",
		"resource.customizations.ignoreDifferences.storage.k8s.io_CSIDriver": "jsonPointers:\n- /spec/preventPodSchedulingIfMissing\n",
	}); err != nil {
		t.Fatalf("write the older operator's argocd-cm keys: %v", err)
	}
	t.Cleanup(func() {
		if err := apply(nil); err != nil { // owned by that manager alone: the keys go
			t.Errorf("remove the older operator's argocd-cm keys: %v", err)
		}
	})
}

// olderOperatorWrite applies a release's Application as the operator's own field manager did
// before argocd.v2: what that manager applies now (the labels and annotations its apply owns,
// the spec) without spec.ignoreDifferences, which the apply so removes. No other manager takes
// a field over, as none did on an upgrade.
func olderOperatorWrite(t *testing.T, s *stack.Stack, name string) {
	t.Helper()
	ctx := t.Context()
	res := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
	live, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var owned map[string]any
	for _, e := range live.GetManagedFields() {
		if e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			if err := json.Unmarshal(e.FieldsV1.Raw, &owned); err != nil {
				t.Fatal(err)
			}
		}
	}
	if owned == nil {
		t.Fatalf("%s has no field the operator applied", name)
	}
	meta := map[string]any{"name": name, "namespace": stack.EngineNamespace}
	ownedMeta, _ := owned["f:metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		ownedKeys, _ := ownedMeta["f:"+field].(map[string]any)
		values, _, _ := unstructured.NestedStringMap(live.Object, "metadata", field)
		kept := map[string]any{}
		for k, v := range values {
			if _, ok := ownedKeys["f:"+k]; ok {
				kept[k] = v
			}
		}
		if len(kept) > 0 {
			meta[field] = kept
		}
	}
	spec, _, err := unstructured.NestedMap(live.Object, "spec")
	if err != nil {
		t.Fatal(err)
	}
	delete(spec, "ignoreDifferences")
	body, err := json.Marshal(map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": meta, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := res.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force}); err != nil {
		t.Fatalf("apply %s as the older operator wrote it: %v", name, err)
	}
}

// "A sync or reconcile happened after the step began", when Argo CD compared the step's spec
// before the step: a hand edit to the values the next plan writes, compared and synced by Argo
// CD, then edited back with Argo CD's controller held. The step's write changes the spec (the
// edit back made it differ), and the status then shows comparedTo, sync result and health of
// exactly the written spec, all from before the step. The step does not pass on it: it waits
// for the refresh its write asked for, which Argo CD answers only once it runs again.
func TestAComparisonFromBeforeTheStepNeverPassesIt(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel, key, next = "jobset", "comparedBeforeTheStep", "the-next-plans-value"
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")

	// With no planner (no drift loop), the next plan's value by hand, compared and synced.
	startPlanner := stopPlanner(t, s)
	stacktest.PatchApp(t, s, rel, fmt.Sprintf(`{"spec":{"source":{"helm":{"valuesObject":{%q:%q}}}}}`, key, next))
	stacktest.WaitApp(t, s, rel, stepTimeout, "the hand edit compared, Synced and Healthy", func(a *argoapp.Application) bool {
		os := a.Status.OperationState
		return stacktest.Values(t, &a.Status.Sync.ComparedTo.Source)[key] == next && a.Status.Sync.Status == argoapp.SyncStatusCodeSynced &&
			a.Status.Health.Status == argoapp.HealthStatusHealthy && a.Operation == nil && (os == nil || os.Phase.Completed())
	})
	// Edited back with Argo CD held: the spec is the active plan's again, the status still the
	// comparison of the edit.
	release := stacktest.HoldArgoCD(t, s)
	stacktest.PatchApp(t, s, rel, fmt.Sprintf(`{"spec":{"source":{"helm":{"valuesObject":{%q:null}}}}}`, key))
	startPlanner()

	stacktest.SetValue(t, components, rel, key, next)
	ro := change(t, s, rt.Status.ActivePlan)
	st := stacktest.StepOf(t, ro, rel, v1alpha1.ActionUpgrade)
	id, token := stepID(ro, st), v1alpha1.StepToken(stepID(ro, st), string(ro.UID))
	written := stacktest.WaitApp(t, s, rel, stepTimeout, "written by "+id, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == id && a.Annotations[v1alpha1.AnnotationRefreshFor] == token
	})
	if w := written.Annotations[v1alpha1.AnnotationStepWrite]; w != v1alpha1.StepWriteChanged || stacktest.Values(t, &written.Status.Sync.ComparedTo.Source)[key] != next {
		t.Fatalf("step-write %q, comparedTo %v; want a changed write over a status that already compared its values: %s", w, written.Status.Sync.ComparedTo.Source.Helm, stacktest.DescribeApp(written))
	}
	waitStep(t, s, ro.Name, rel, promptTimeout, "judged, not ready while Argo CD has not compared since the write", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.State != v1alpha1.StepInProgress {
			return fmt.Errorf("%w: the step is %s (%s): it passed on a comparison from before its write", errStop, st.State, st.Message)
		}
		if f := fence(st.Verdict, v1alpha1.FenceSyncedAfterStep); st.Verdict == nil || f.State != v1alpha1.FenceOpen || !has(f.Message, id, "Argo CD has not compared since") {
			return fmt.Errorf("verdict %+v", st.Verdict)
		}
		if f := fence(st.Verdict, v1alpha1.FenceComparedToSpec); f.State != v1alpha1.FencePassed {
			return fmt.Errorf("%w: ComparedToSpec %s (%s): the status from before the step should read as the written spec's", errStop, f.State, f.Message)
		}
		return nil
	})
	release()
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	cleared, _, ok := apps.FirstApp(t, rel, func(a *argoapp.Application) bool {
		_, asked := a.Annotations[v1alpha1.AnnotationArgoRefresh]
		return a.Annotations[v1alpha1.AnnotationRefreshFor] == token && !asked
	})
	if !ok {
		t.Fatalf("no recorded version of %s shows Argo CD answered the refresh of %s", rel, id)
	}
	ev, _ := rollouts.FirstStep(t, ro.Name, rel, func(s v1alpha1.Step) bool { return s.State == v1alpha1.StepSucceeded })
	if ev.RV <= cleared.RV {
		t.Errorf("step %s succeeded at rv %d, before Argo CD answered its refresh (rv %d)", id, ev.RV, cleared.RV)
	}
	rolledOut(t, s)
}
