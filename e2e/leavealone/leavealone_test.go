//go:build e2e

package leavealone

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// "Edit an owned Application": with no rollout in progress, the operator forces its fields back
// and records FieldOwnershipOverridden.
func TestEditedApplicationIsForcedBackWithNoRolloutInProgress(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const rel = "kube-prometheus-stack"
	want := stacktest.Values(t, stacktest.Application(t, s, rel).Spec.Source)
	if want["logLevel"] != "info" {
		t.Fatalf("%s starts with values %v, want logLevel info", rel, want)
	}
	seen := markEvents(t, s)

	edited := stacktest.PatchApp(t, s, rel, `{"spec":{"source":{"helm":{"valuesObject":{"logLevel":"debug"}}}}}`)
	if got := stacktest.Values(t, edited.Spec.Source)["logLevel"]; got != "debug" {
		t.Fatalf("the hand edit was not stored: logLevel %v", got)
	}

	msg := waitEvent(t, s, seen, repairTimeout, v1alpha1.EventFieldOwnershipOverridden, "Application "+rel+" was edited", bus.DriftValues, stacktest.Person)
	t.Logf("event: %s", msg)
	app := stacktest.WaitApp(t, s, rel, repairTimeout, "forced back to the planned values and owned by the operator again", func(a *argoapp.Application) bool {
		return equalJSON(stacktest.Values(t, a.Spec.Source), want) && owns(a, v1alpha1.FieldManager, "f:logLevel") && !owns(a, stacktest.Person, "f:logLevel")
	})
	stacktest.WaitApp(t, s, rel, syncTimeout, "Synced/Healthy at the planned values", syncedHealthy)

	// A repair is not a rollout: the runtime stays at its plan with the same rollout, and is
	// Ready again (RolledOut) once readiness judges the repaired release ready; while the edit
	// stood it was NotReady (docs/readiness.md).
	var after *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(t.Context(), syncTimeout, "the runtime Ready=True RolledOut again", func(ctx context.Context) (bool, error) {
		var err error
		if after, err = s.Runtime(ctx); err != nil {
			return false, err
		}
		if after.Status.Rollout != rt.Status.Rollout || after.Status.ActivePlan != rt.Status.ActivePlan {
			return false, fmt.Errorf("the repair moved the runtime: rollout %s -> %s, plan %s -> %s", rt.Status.Rollout, after.Status.Rollout, rt.Status.ActivePlan, after.Status.ActivePlan)
		}
		c := stacktest.Condition(after, v1alpha1.ConditionReady)
		return c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRolledOut, nil
	})
	if err != nil {
		if after == nil {
			t.Fatal(err)
		}
		c := stacktest.Condition(after, v1alpha1.ConditionReady)
		t.Fatalf("%v: Ready=%s %s: %s", err, c.Status, c.Reason, c.Message)
	}
	if !strings.HasPrefix(app.Annotations[v1alpha1.AnnotationStep], rt.Status.Rollout+"/") && !strings.HasPrefix(app.Annotations[v1alpha1.AnnotationStep], "repair/") {
		t.Errorf("step annotation %q: want the rollout's step or a repair", app.Annotations[v1alpha1.AnnotationStep])
	}
}

// "Edit an owned Application": during a rollout, an edit of another release's values stalls it
// with InventoryDrift, and no step starts until the edit is undone.
func TestValuesEditDuringRolloutStallsWithInventoryDrift(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	ctx := t.Context()
	const edited = "nfd" // not part of the rollout below
	orig := stacktest.Values(t, stacktest.Application(t, s, edited).Spec.Source)

	// A rollout in flight that starts no step: paused, then a bundle changing three releases.
	paused := stack.DefaultRuntimeSpec()
	paused.Paused = true
	if err := s.ApplyRuntime(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitCondition(ctx, stallTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPaused); err != nil {
		t.Fatal(err)
	}
	changed := []string{"jobset", "kubeflow-trainer", "dcgm-exporter"}
	for _, c := range changed {
		stacktest.SetValue(t, components, c, "logLevel", "debug")
	}
	applyBundle(t, s)
	ro := inFlight(t, s, stallTimeout)
	t.Logf("rollout %s in flight (%s): %d steps", ro.Name, ro.Status.Phase, len(ro.Status.Steps))

	if orig["replicas"] != float64(1) {
		t.Fatalf("%s starts with values %v, want replicas 1", edited, orig)
	}
	stacktest.PatchApp(t, s, edited, `{"spec":{"source":{"helm":{"valuesObject":{"replicas":2}}}}}`)
	rt, err := s.WaitCondition(ctx, stallTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInventoryDrift)
	if err != nil {
		t.Fatal(err)
	}
	if c := stacktest.Condition(rt, v1alpha1.ConditionStalled); !strings.Contains(c.Message, edited) || !strings.Contains(c.Message, ro.Name) {
		t.Errorf("Stalled message %q does not name the edited release %s and rollout %s", c.Message, edited, ro.Name)
	}
	ro, err = s.Rollout(ctx, ro.Name)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(ro.Status.Conditions, "InventoryDrift"); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, edited+": "+bus.DriftValues) {
		t.Errorf("rollout %s InventoryDrift condition %+v, want True listing %s: %s", ro.Name, c, edited, bus.DriftValues)
	}
	// The edit is not forced back during the rollout: it is the person's to undo.
	if got := stacktest.Values(t, stacktest.Application(t, s, edited).Spec.Source)["replicas"]; got != float64(2) {
		t.Errorf("%s replicas %v during the rollout: the operator overwrote a content edit mid-rollout", edited, got)
	}

	// Unpausing does not start a step while the drift stands.
	if err := s.ApplyRuntime(ctx, stack.DefaultRuntimeSpec()); err != nil {
		t.Fatal(err)
	}
	rt, err = s.WaitCondition(ctx, stallTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRollingOut)
	if err != nil {
		t.Fatal(err)
	}
	if c := stacktest.Condition(rt, v1alpha1.ConditionStalled); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInventoryDrift {
		t.Errorf("unpaused runtime Stalled=%s %s (%s), want True InventoryDrift", c.Status, c.Reason, c.Message)
	}
	ro, err = s.Rollout(ctx, ro.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range ro.Status.Steps {
		if st.State != v1alpha1.StepPending || st.StartedAt != nil {
			t.Errorf("step %d %s is %s (started %v) while the inventory drifted", st.Index, st.Release, st.State, st.StartedAt)
		}
	}

	// Undoing the edit by hand (the person still owns the field, with the written value) lets
	// the rollout go on to Ready.
	undone := stacktest.PatchApp(t, s, edited, `{"spec":{"source":{"helm":{"valuesObject":{"replicas":1}}}}}`)
	if !owns(undone, stacktest.Person, "f:replicas") {
		t.Fatalf("the undo did not leave the field with %s: %s", stacktest.Person, stacktest.DescribeApp(undone))
	}
	if _, err := s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
	if got := stacktest.Values(t, stacktest.Application(t, s, edited).Spec.Source); !equalJSON(got, orig) {
		t.Errorf("%s values %v after the rollout, want %v", edited, got, orig)
	}
	for _, c := range changed {
		if got := stacktest.Values(t, stacktest.Application(t, s, c).Spec.Source)["logLevel"]; got != "debug" {
			t.Errorf("%s logLevel %v after the rollout, want debug", c, got)
		}
	}
}

// "Disable automated sync on an owned Application": the operator states enabled: true and
// repairs it.
func TestDisabledAutomatedSyncIsRepaired(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	const rel = "jobset"
	seen := markEvents(t, s)

	off := stacktest.PatchApp(t, s, rel, `{"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`)
	if automatedOn(off) {
		t.Fatalf("the hand edit was not stored: %s", stacktest.DescribeApp(off))
	}
	msg := waitEvent(t, s, seen, repairTimeout, v1alpha1.EventFieldOwnershipOverridden, "Application "+rel+" was edited", bus.DriftAutoSyncDisabled)
	t.Logf("event: %s", msg)
	app := stacktest.WaitApp(t, s, rel, repairTimeout, "automated sync enabled again", func(a *argoapp.Application) bool {
		return automatedOn(a) && owns(a, v1alpha1.FieldManager, "f:enabled") && !owns(a, stacktest.Person, "f:enabled")
	})
	if sp := app.Spec.SyncPolicy; !stacktest.True(sp.Automated.Prune) || !stacktest.True(sp.Automated.SelfHeal) {
		t.Errorf("repaired sync policy %+v lost prune or selfHeal", sp.Automated)
	}
	stacktest.WaitApp(t, s, rel, syncTimeout, "Synced/Healthy", syncedHealthy)
}

// "Add the resources finalizer": the operator then writes nothing to that Application (the
// applier refuses, and the admission webhook denies any write by an operator identity) and the
// rollout that reaches it stalls; removing the finalizer by hand lets it go on.
func TestResourcesFinalizerBlocksOperatorWrites(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	ctx := t.Context()
	const rel = "kubeflow-trainer"
	seen := markEvents(t, s)

	armed := stacktest.PatchApp(t, s, rel, `{"metadata":{"finalizers":["`+v1alpha1.ArgoResourcesFinalizer+`"]}}`)
	if !slices.Contains(armed.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		t.Fatalf("the finalizer was not stored: %v", armed.Finalizers)
	}
	// Readiness reports the finalizer; the planner's repair is refused by the applier.
	msg := waitEvent(t, s, seen, repairTimeout, bus.ResultReasonFinalizerPresent, "repair of "+rel+" refused", v1alpha1.ArgoResourcesFinalizer)
	t.Logf("event: %s", msg)

	// The webhook denies a write by an operator identity (here the applier's).
	cfg := s.Env.ConfigFor(stack.Identity("applier"), "system:serviceaccounts", "system:serviceaccounts:"+stack.OperatorNamespace, "system:authenticated")
	applier, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = applier.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Patch(ctx, rel, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"operator.aicr.run/e2e-probe":"x"}}}`), metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
	if err == nil || !strings.Contains(err.Error(), v1alpha1.ArgoResourcesFinalizer) || !strings.Contains(err.Error(), "may not write or delete it") {
		t.Fatalf("a write as %s to the armed Application: err %v, want the webhook's denial naming the finalizer", stack.Identity("applier"), err)
	}
	t.Logf("webhook: %v", err)

	// A bundle change that reaches the release stalls on it, and nothing is written to it.
	before := stacktest.Application(t, s, rel)
	stacktest.SetValue(t, components, rel, "logLevel", "warn")
	applyBundle(t, s)
	ro := inFlight(t, s, stallTimeout)
	rt, err := s.WaitCondition(ctx, stallTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonTransitionBlocked)
	if err != nil {
		t.Fatal(err)
	}
	if c := stacktest.Condition(rt, v1alpha1.ConditionStalled); !strings.Contains(c.Message, rel) || !strings.Contains(c.Message, v1alpha1.ArgoResourcesFinalizer) {
		t.Errorf("Stalled message %q does not name %s and the finalizer", c.Message, rel)
	}
	ro, err = s.Rollout(ctx, ro.Name)
	if err != nil {
		t.Fatal(err)
	}
	if st := stepOf(t, ro, rel); st.State != v1alpha1.StepBlocked || st.Reason != v1alpha1.ReasonTransitionBlocked {
		t.Errorf("step %s: %s %s (%s), want Blocked TransitionBlocked", rel, st.State, st.Reason, st.Message)
	}
	during := stacktest.Application(t, s, rel)
	if specJSON(t, during) != specJSON(t, before) || during.Annotations[v1alpha1.AnnotationStep] != before.Annotations[v1alpha1.AnnotationStep] {
		t.Errorf("the armed Application was written during the stall:\nbefore %s\nduring %s", stacktest.DescribeApp(before), stacktest.DescribeApp(during))
	}
	if _, ok := during.Annotations["operator.aicr.run/e2e-probe"]; ok {
		t.Errorf("the denied write was stored")
	}

	// Removing the finalizer by hand: the step's retry writes it and the rollout finishes.
	stacktest.PatchApp(t, s, rel, `{"metadata":{"finalizers":null}}`)
	if _, err := s.WaitCondition(ctx, retryTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
	app := stacktest.Application(t, s, rel)
	if got := stacktest.Values(t, app.Spec.Source)["logLevel"]; got != "warn" || len(app.Finalizers) != 0 || !strings.HasPrefix(app.Annotations[v1alpha1.AnnotationStep], ro.Name+"/") {
		t.Errorf("after the finalizer's removal: %s, want logLevel warn written by rollout %s", stacktest.DescribeApp(app), ro.Name)
	}
}

// "Delete an owned Application to remove a component": its resources stay, and the operator
// writes it again.
func TestDeletedApplicationIsWrittenAgain(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	ctx := t.Context()
	const rel, ns = "nodewright-customizations", "nodewright"
	deploy, err := s.Kube.AppsV1().Deployments(ns).Get(ctx, rel+"-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's Deployment: %v", err)
	}
	old := stacktest.Application(t, s, rel)
	seen := markEvents(t, s)

	if err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Delete(ctx, rel, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete application %s: %v", rel, err)
	}
	msg := waitEvent(t, s, seen, repairTimeout, "ApplicationRewritten", rel)
	t.Logf("event: %s", msg)
	app := stacktest.WaitApp(t, s, rel, repairTimeout, "written again as a new object", func(a *argoapp.Application) bool {
		return a.UID != old.UID && a.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue
	})
	if specJSON(t, app) != specJSON(t, old) {
		t.Errorf("the rewritten Application's spec differs:\nold %s\nnew %s", specJSON(t, old), specJSON(t, app))
	}
	if slices.Contains(app.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		t.Errorf("the rewritten Application carries the resources finalizer")
	}
	stacktest.WaitApp(t, s, rel, syncTimeout, "Synced/Healthy", syncedHealthy)

	after, err := s.Kube.AppsV1().Deployments(ns).Get(ctx, rel+"-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release's Deployment after the Application's deletion: %v", err)
	}
	if after.UID != deploy.UID || after.DeletionTimestamp != nil {
		t.Errorf("the release's Deployment was deleted or replaced: uid %s -> %s, deletionTimestamp %v", deploy.UID, after.UID, after.DeletionTimestamp)
	}
	// While the Application is written again and not yet compared, the runtime is NotReady;
	// it is Ready again once readiness judges the new object ready.
	if _, err := s.WaitCondition(ctx, syncTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
}

// "Create an Application with a release's name yourself": it is foreign; the operator never
// writes or deletes it, and the rollout that reaches that release fails (ForeignObject) at once,
// with the labels and annotations that made it foreign in the condition, rather than retrying
// until its action timeout. Deleting it, then the failed rollout, rolls the same plan out.
func TestForeignApplicationFailsTheRolloutAndIsLeftAlone(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	ctx := t.Context()
	extra := stack.ExampleComponent{Name: "e2e-extra", Dir: "charts", Namespace: "e2e-extra", DependsOn: []string{"cert-manager"},
		Values: map[string]any{"replicas": 1, "logLevel": "info"}}
	if err := s.AddComponent(ctx, extra, "cert-manager"); err != nil {
		t.Fatal(err)
	}

	// Someone else's Application with the new release's name: no sync policy, another project,
	// another namespace, so Argo CD only compares it.
	foreign := &argoapp.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{Name: extra.Name, Namespace: stack.EngineNamespace,
			Labels: map[string]string{"team": "someone-else"}, Annotations: map[string]string{"owner": "someone-else"}},
		Spec: argoapp.ApplicationSpec{
			Project:     "default",
			Source:      &argoapp.ApplicationSource{RepoURL: "oci://" + s.Repository + "/charts/cert-manager", Path: ".", TargetRevision: s.Digests["cert-manager"]},
			Destination: argoapp.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: "e2e-someone-else"},
		},
	}
	created := createApp(t, s, foreign)

	components = append(components, extra)
	applyBundle(t, s)
	// At once: a step kept Blocked would stall with ForeignObject and retry until its action
	// timeout (15 minutes), well past this wait.
	rt, err := s.WaitCondition(ctx, stallTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolloutFailed)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Spec.ToDigest != rt.Status.DesiredPlan {
		t.Fatalf("the failed rollout %s goes to %s, not to the desired plan %s", ro.Name, ro.Spec.ToDigest, rt.Status.DesiredPlan)
	}
	c := stacktest.Condition(rt, v1alpha1.ConditionStalled)
	for _, want := range []string{ro.Name, extra.Name, v1alpha1.ReasonForeignObject,
		`label app.kubernetes.io/managed-by is missing (want "aicr-operator")`, "annotation operator.aicr.run/runtime-uid is missing"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Stalled message %q does not say %q", c.Message, want)
		}
	}
	t.Logf("Stalled=True RolloutFailed: %s", c.Message)
	if st := stepOf(t, ro, extra.Name); ro.Status.Phase != v1alpha1.PhaseFailed || st.State != v1alpha1.StepFailed || st.Reason != v1alpha1.ReasonForeignObject {
		t.Errorf("rollout %s, step %s: %s %s (%s); want Failed, Failed ForeignObject", ro.Status.Phase, extra.Name, st.State, st.Reason, st.Message)
	}
	// Untouched: same object, spec, labels, annotations and finalizers, and no operator manager.
	live := stacktest.Application(t, s, extra.Name)
	if live.UID != created.UID || specJSON(t, live) != specJSON(t, created) || !equalJSON(live.Labels, created.Labels) ||
		!equalJSON(live.Annotations, created.Annotations) || !equalJSON(live.Finalizers, created.Finalizers) {
		t.Errorf("the foreign Application was changed:\ncreated %s %v %v %s\nnow     %s %v %v %s",
			created.UID, created.Labels, created.Annotations, specJSON(t, created), live.UID, live.Labels, live.Annotations, specJSON(t, live))
	}
	for _, e := range live.ManagedFields {
		if strings.HasPrefix(e.Manager, v1alpha1.FieldManager) {
			t.Errorf("the foreign Application has fields managed by %s: %s", e.Manager, e.FieldsV1)
		}
	}

	// Deleting it, then the failed rollout, tries the same plan again: it installs the release.
	if err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Delete(ctx, extra.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, s, extra.Name, stallTimeout)
	if err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Delete(ctx, ro.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
	app := stacktest.WaitApp(t, s, extra.Name, syncTimeout, "owned, Synced/Healthy", func(a *argoapp.Application) bool {
		return a.UID != created.UID && a.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue && syncedHealthy(a)
	})
	if !strings.HasPrefix(app.Annotations[v1alpha1.AnnotationStep], ro.Name+"/") {
		t.Errorf("%s was written by step %q, want a step of the new %s", extra.Name, app.Annotations[v1alpha1.AnnotationStep], ro.Name)
	}
}

// "Add fields to a component's resources by hand": with server-side apply, Argo CD compares and
// self-heals only the fields its manifests set: an added env var and label stay, Synced and
// Healthy; a field the manifests set is reverted.
func TestHandAddedResourceFieldsStayAndManifestFieldsRevert(t *testing.T) {
	s := stacktest.Need(t)
	rolledOut(t, s)
	ctx := t.Context()
	const rel, ns = "cert-manager", "cert-manager"
	deploys := s.Kube.AppsV1().Deployments(ns)
	name := rel + "-controller"
	const label, env = "e2e.aicr.run/hand-added", "E2E_HAND_ADDED"

	added := `{"metadata":{"labels":{"` + label + `":"yes"}},"spec":{"template":{"spec":{"containers":[{"name":"controller","env":[{"name":"` + env + `","value":"yes"}]}]}}}}`
	if _, err := deploys.Patch(ctx, name, types.StrategicMergePatchType, []byte(added), metav1.PatchOptions{FieldManager: stacktest.Person}); err != nil {
		t.Fatalf("add a label and an env var by hand: %v", err)
	}
	// Ask Argo CD to compare now; it removes the annotation once it has.
	stacktest.PatchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationArgoRefresh+`":"normal"}}}`)
	stacktest.WaitApp(t, s, rel, syncTimeout, "compared after the addition and still Synced/Healthy", func(a *argoapp.Application) bool {
		_, pending := a.Annotations[v1alpha1.AnnotationArgoRefresh]
		return !pending && syncedHealthy(a)
	})
	handAdded(t, s, ns, name, label, env)
	var prev metav1.Time
	if op := stacktest.Application(t, s, rel).Status.OperationState; op != nil {
		prev = op.StartedAt
	}

	// A field the manifests set (replicas: 1) is reverted by self-heal; the additions stay.
	if _, err := deploys.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{FieldManager: stacktest.Person}); err != nil {
		t.Fatalf("scale by hand: %v", err)
	}
	err := testenv.WaitFor(ctx, selfHealTimout, "replicas of "+name+" reverted to 1", func(ctx context.Context) (bool, error) {
		d, err := deploys.Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 1, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The revert was Argo CD's: an automated sync newer than the last one before the edit.
	stacktest.WaitApp(t, s, rel, syncTimeout, "Synced/Healthy after an automated (self-heal) sync", func(a *argoapp.Application) bool {
		op := a.Status.OperationState
		return syncedHealthy(a) && op != nil && op.Phase == "Succeeded" && op.Operation.InitiatedBy.Automated && op.StartedAt.After(prev.Time)
	})
	handAdded(t, s, ns, name, label, env)

	// To undo an addition, remove the field by hand.
	removed := `{"metadata":{"labels":{"` + label + `":null}},"spec":{"template":{"spec":{"containers":[{"name":"controller","env":[{"name":"` + env + `","$patch":"delete"}]}]}}}}`
	if _, err := deploys.Patch(ctx, name, types.StrategicMergePatchType, []byte(removed), metav1.PatchOptions{FieldManager: stacktest.Person}); err != nil {
		t.Fatalf("remove the additions by hand: %v", err)
	}
	stacktest.WaitApp(t, s, rel, syncTimeout, "Synced/Healthy after the additions were removed", syncedHealthy)
}

// handAdded checks the Deployment still carries the hand-added label and env var.
func handAdded(t *testing.T, s *stack.Stack, ns, name, label, env string) {
	t.Helper()
	d, err := s.Kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels[label] != "yes" {
		t.Errorf("the hand-added label %s is gone: %v", label, d.Labels)
	}
	var found bool
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			found = found || (c.Name == "controller" && e.Name == env && e.Value == "yes")
		}
	}
	if !found {
		t.Errorf("the hand-added env var %s is gone: %+v", env, d.Spec.Template.Spec.Containers)
	}
}
