//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// syncedSpec reports whether the Application's last operation is a finished, succeeded sync of
// exactly its current spec (values included) at its chart digest.
func syncedSpec(app *argoapp.Application) bool {
	op := app.Status.OperationState
	return app.Operation == nil && op != nil && op.Phase == "Succeeded" && op.SyncResult != nil && op.FinishedAt != nil &&
		op.SyncResult.Revision == app.Spec.Source.TargetRevision && appspec.EqualSource(&op.SyncResult.Source, app.Spec.Source)
}

// An upgrade whose Application still reads the old Synced/Healthy does not advance: the step is
// judged only at the new revision. The stale window is forced: Argo CD's application controller
// is held while the step writes, so the written spec stands over the status of the old one,
// Synced and Healthy; readiness's verdict on exactly that version (its resourceVersion) is the
// proof it was judged, and the step stays InProgress with ComparedToSpec Open. Then kwok is
// stopped so the new DaemonSet pod never becomes ready: Argo CD syncs the new spec, the step
// stays InProgress with a fence Open, and it finishes only after kwok is back. From the recorded
// versions, the step finished after Argo CD's sync of the new spec finished (resourceVersion
// order and finishedAt), with every fence Passed.
func TestUpgradeIsJudgedOnlyAtTheNewRevision(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	bundle, spec := upgradeGPUOperator(t, s)
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")
	before := stacktest.Application(t, s, "gpu-operator")
	if before.Status.Sync.Status != "Synced" || before.Status.Health.Status != "Healthy" {
		t.Fatalf("gpu-operator before the upgrade: %s/%s, want Synced/Healthy", before.Status.Sync.Status, before.Status.Health.Status)
	}

	startKwok := stacktest.HoldProcess(t, s, testenv.ProcKwok)
	releaseArgoCD := stacktest.HoldArgoCD(t, s)

	ro := change(t, s, bundle, spec)
	st := stacktest.StepOf(t, ro, "gpu-operator", v1alpha1.ActionUpgrade)
	id := stepID(ro, st)

	// The stale window: the step's write stands over the old spec's Synced/Healthy. Wait for a
	// verdict on a version the step wrote (the proof readiness judged it), then check that
	// version was stale and the step did not pass on it.
	var judged v1alpha1.Step
	err := testenv.WaitFor(ctx, heldTimeout, "a verdict on gpu-operator as step "+id+" wrote it, before Argo CD compared", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, ro.Name)
		if err != nil {
			return false, err
		}
		cur, _ := stacktest.FindStep(r, "gpu-operator")
		switch cur.State {
		case v1alpha1.StepSucceeded, v1alpha1.StepFailed:
			return false, testenv.Permanent(fmt.Errorf("step %s is %s (%s) before Argo CD compared its write: judged on the status of the old spec", id, cur.State, cur.Message))
		case v1alpha1.StepInProgress:
		default:
			return false, fmt.Errorf("step %s is %s", id, cur.State)
		}
		if cur.Verdict == nil || cur.Verdict.ResourceVersion == "" {
			return false, fmt.Errorf("no verdict yet")
		}
		rv, err := strconv.ParseUint(cur.Verdict.ResourceVersion, 10, 64)
		if err != nil {
			return false, testenv.Permanent(fmt.Errorf("verdict resourceVersion %q: %w", cur.Verdict.ResourceVersion, err))
		}
		if a := versionAt(t, apps, "gpu-operator", rv); a == nil || a.Annotations[v1alpha1.AnnotationStep] != id {
			return false, fmt.Errorf("the verdict judged resourceVersion %d, not a version step %s wrote", rv, id)
		}
		judged = cur
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.ParseUint(judged.Verdict.ResourceVersion, 10, 64)
	stale := versionAt(t, apps, "gpu-operator", rv)
	if stale.Status.Sync.Status != argoapp.SyncStatusCodeSynced || stale.Status.Health.Status != argoapp.HealthStatusHealthy ||
		appspec.EqualSource(&stale.Status.Sync.ComparedTo.Source, stale.Spec.Source) {
		t.Fatalf("the judged version (rv %d) is no stale window: %s/%s, comparedTo equal to the spec %v",
			rv, stale.Status.Sync.Status, stale.Status.Health.Status, appspec.EqualSource(&stale.Status.Sync.ComparedTo.Source, stale.Spec.Source))
	}
	if f, _ := fence(judged.Verdict, v1alpha1.FenceComparedToSpec); judged.Verdict.Ready || f.State != v1alpha1.FenceOpen {
		t.Errorf("verdict on the stale version: ready %v, ComparedToSpec %s (%s); want not ready, Open", judged.Verdict.Ready, f.State, f.Message)
	}
	t.Logf("stale window: gpu-operator at rv %d read %s/%s of the old spec, step %s judged with fences %s", rv, stale.Status.Sync.Status, stale.Status.Health.Status, id, fenceList(judged.Verdict))
	releaseArgoCD()

	// Held: Argo CD compared (and synced) the new spec, but the new pod is not ready.
	var held *v1alpha1.RuntimeRollout
	err = testenv.WaitFor(ctx, heldTimeout, "gpu-operator's step held InProgress with a fence Open after Argo CD compared the new spec", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, ro.Name)
		if err != nil {
			return false, err
		}
		cur, _ := stacktest.FindStep(r, "gpu-operator")
		if cur.State != v1alpha1.StepInProgress {
			return false, fmt.Errorf("step %s is %s", id, cur.State)
		}
		if cmp, _ := fence(cur.Verdict, v1alpha1.FenceComparedToSpec); cmp.State != v1alpha1.FencePassed || !heldOpen(cur) {
			return false, fmt.Errorf("verdict %+v", cur.Verdict)
		}
		held = r
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	heldStep, _ := stacktest.FindStep(held, "gpu-operator")
	for _, f := range heldStep.Verdict.Fences {
		t.Logf("held: fence %s %s: %s", f.Name, f.State, f.Message)
	}
	app := stacktest.Application(t, s, "gpu-operator")
	t.Logf("held: gpu-operator reads %s/%s at %s (operation %v)", app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, opPhase(app))
	if app.Annotations[v1alpha1.AnnotationStep] != id || app.Annotations[v1alpha1.AnnotationStepWrite] != v1alpha1.StepWriteChanged {
		t.Errorf("gpu-operator annotations %v, want step %s written changed", app.Annotations, id)
	}
	// Whatever the Application read while held, the step did not advance; the runtime says so.
	rt, err := s.Runtime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := readyOf(rt); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRollingOut {
		t.Errorf("runtime while held: Ready=%s/%s, want False/%s", c.Status, c.Reason, v1alpha1.ReasonRollingOut)
	}

	startKwok()
	done := waitRolloutDone(t, s, ro.Name)
	final, _ := stacktest.FindStep(done, "gpu-operator")
	allPassed(t, final)
	waitRolledOut(t, s)

	// The recorded facts: the sync of the new spec finished before the step did.
	syncEv, synced, ok := apps.FirstApp(t, "gpu-operator", func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == id && syncedSpec(a)
	})
	if !ok {
		t.Fatalf("no recorded version of gpu-operator shows a finished sync of the spec step %s wrote", id)
	}
	if !appspec.EqualSource(&synced.Status.OperationState.SyncResult.Source, stacktest.Application(t, s, "gpu-operator").Spec.Source) {
		t.Fatalf("the recorded sync's source is not the current spec")
	}
	if got := synced.Spec.Source.Helm.ValuesObject; got == nil || !strings.Contains(string(got.Raw), driverVersionOf(spec)) {
		t.Fatalf("the synced values %s do not carry the new driver version %s", got.Raw, driverVersionOf(spec))
	}
	doneEv, doneStep := rollouts.FirstStep(t, ro.Name, "gpu-operator", stepSucceeded)
	if doneEv.RV <= syncEv.RV {
		t.Errorf("the step turned Succeeded at resourceVersion %d, not after the sync of the new spec finished (%d)", doneEv.RV, syncEv.RV)
	}
	if doneStep.FinishedAt == nil || doneStep.FinishedAt.Before(synced.Status.OperationState.FinishedAt) {
		t.Errorf("step finishedAt %v is before the sync's finishedAt %v", doneStep.FinishedAt, synced.Status.OperationState.FinishedAt)
	}
	if heldEv, _ := rollouts.FirstStep(t, ro.Name, "gpu-operator", heldOpen); heldEv.RV >= doneEv.RV {
		t.Errorf("the held verdict (rv %d) was not recorded before the step finished (rv %d)", heldEv.RV, doneEv.RV)
	}
}

// heldOpen is the held step the test waits for: in progress, with Healthy open (the new pod is
// not ready) or SyncedAfterStep open (Argo CD's sync of the new spec still runs; Healthy may
// still pass on the old pod then). Which of the two a verdict catches depends on the machine's
// speed, so the final check takes either, as the wait does.
func heldOpen(st v1alpha1.Step) bool {
	healthy, _ := fence(st.Verdict, v1alpha1.FenceHealthy)
	after, _ := fence(st.Verdict, v1alpha1.FenceSyncedAfterStep)
	return st.State == v1alpha1.StepInProgress && (healthy.State == v1alpha1.FenceOpen || after.State == v1alpha1.FenceOpen)
}

// The readiness gate is synced by an operation the operator initiates in each of its steps:
// after gpu-operator's upgrade the gate gets an Apply step, whose sync is initiated by
// aicr-operator with info aicr-step=<step>, succeeds, and runs the gate's Job again.
func TestReadinessGateIsSyncedByTheOperatorInItsStep(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	bundle, spec := upgradeGPUOperator(t, s)
	jobs := s.Kube.BatchV1().Jobs("gpu-operator")
	oldJob, err := jobs.Get(ctx, "gpu-operator-readiness-check", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gate's Job before the upgrade: %v", err)
	}

	ro := change(t, s, bundle, spec)
	gate := stacktest.StepOf(t, ro, "gpu-operator-readiness", v1alpha1.ActionApply)
	if !gate.ReadinessGate {
		t.Errorf("gate step %d is not marked readinessGate", gate.Index)
	}
	stacktest.StepOf(t, ro, "gpu-operator", v1alpha1.ActionUpgrade)
	id := stepID(ro, gate)
	done := waitRolloutDone(t, s, ro.Name)
	gate, _ = stacktest.FindStep(done, "gpu-operator-readiness")
	allPassed(t, gate)
	if f, _ := fence(gate.Verdict, v1alpha1.FenceGateSynced); f.State != v1alpha1.FencePassed {
		t.Errorf("gate verdict has GateSynced %+v, want Passed", f)
	}

	app := stacktest.Application(t, s, "gpu-operator-readiness")
	op := app.Status.OperationState
	if op == nil || app.Operation != nil {
		t.Fatalf("gate: operation %v, operationState %v; want a finished operation", app.Operation, op)
	}
	if op.Operation.InitiatedBy.Username != v1alpha1.FieldManager || op.Operation.InitiatedBy.Automated {
		t.Errorf("gate's sync initiated by %+v, want username %s", op.Operation.InitiatedBy, v1alpha1.FieldManager)
	}
	if got, want := infoValue(op.Operation.Info, appspec.StepInfoName), v1alpha1.StepToken(id, string(ro.UID)); got != want {
		t.Errorf("gate's sync info %s=%q, want %q", appspec.StepInfoName, got, want)
	}
	if op.Phase != "Succeeded" || op.StartedAt.Before(gate.StartedAt) {
		t.Errorf("gate's sync phase %s started %s, want Succeeded after the step began (%s)", op.Phase, op.StartedAt, gate.StartedAt)
	}
	job, err := jobs.Get(ctx, "gpu-operator-readiness-check", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gate's Job after the step: %v", err)
	}
	if job.UID == oldJob.UID || job.CreationTimestamp.Before(gate.StartedAt) {
		t.Errorf("the gate's Job %s (created %s) did not run again in step %s (began %s; old Job %s)", job.UID, job.CreationTimestamp, id, gate.StartedAt, oldJob.UID)
	}
	if !jobComplete(job) {
		t.Errorf("the gate's Job is not Complete: %+v", job.Status)
	}
}

// Every step's write asks Argo CD to compare with argocd.argoproj.io/refresh, together with
// refresh-for=<step>, whether it changed the spec (the upgraded release, step-write=changed) or
// left it as it was (the gate's Apply step, step-write=unchanged); Argo CD removes the refresh
// annotation, and each step finished only after that removal was stored: the proof that Argo CD
// compared after the step began.
func TestEveryStepWriteAsksForARefreshThatArgoCDClears(t *testing.T) {
	s := stacktest.Need(t)
	bundle, spec := upgradeGPUOperator(t, s)
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")
	ro := change(t, s, bundle, spec)
	waitRolloutDone(t, s, ro.Name)
	waitRolledOut(t, s)

	for _, tc := range []struct {
		release string
		action  v1alpha1.StepAction
		write   string
	}{
		{"gpu-operator", v1alpha1.ActionUpgrade, v1alpha1.StepWriteChanged},
		{"gpu-operator-readiness", v1alpha1.ActionApply, v1alpha1.StepWriteUnchanged},
	} {
		st := stacktest.StepOf(t, ro, tc.release, tc.action)
		id, token := stepID(ro, st), stepToken(ro, st)
		app := stacktest.Application(t, s, tc.release)
		if got := app.Annotations[v1alpha1.AnnotationStep]; got != id {
			t.Fatalf("%s's step annotation %q, want %q", tc.release, got, id)
		}
		if got := app.Annotations[v1alpha1.AnnotationStepWrite]; got != tc.write {
			t.Errorf("%s's step-write %q, want %q", tc.release, got, tc.write)
		}
		if got := app.Annotations[v1alpha1.AnnotationStepRolloutUID]; got != string(ro.UID) {
			t.Errorf("%s's step-rollout-uid %q, want the rollout's UID %q", tc.release, got, ro.UID)
		}
		if got := app.Annotations[v1alpha1.AnnotationRefreshFor]; got != token {
			t.Errorf("%s's refresh-for %q, want %q", tc.release, got, token)
		}
		if v, ok := app.Annotations[v1alpha1.AnnotationArgoRefresh]; ok {
			t.Errorf("%s still carries %s=%q after its step", tc.release, v1alpha1.AnnotationArgoRefresh, v)
		}

		asked, _, ok := apps.FirstApp(t, tc.release, func(a *argoapp.Application) bool {
			return a.Annotations[v1alpha1.AnnotationRefreshFor] == token && a.Annotations[v1alpha1.AnnotationArgoRefresh] == v1alpha1.ArgoRefreshNormal
		})
		if !ok {
			t.Errorf("no recorded version of %s carries refresh=%s with refresh-for=%s", tc.release, v1alpha1.ArgoRefreshNormal, token)
			continue
		}
		cleared, _, ok := apps.FirstApp(t, tc.release, func(a *argoapp.Application) bool {
			_, refresh := a.Annotations[v1alpha1.AnnotationArgoRefresh]
			return a.Annotations[v1alpha1.AnnotationRefreshFor] == token && !refresh
		})
		if !ok {
			t.Errorf("no recorded version of %s shows the refresh for %s cleared", tc.release, token)
			continue
		}
		if cleared.RV <= asked.RV {
			t.Errorf("%s: refresh cleared at rv %d, not after it was asked at rv %d", tc.release, cleared.RV, asked.RV)
		}
		doneEv, _ := rollouts.FirstStep(t, ro.Name, tc.release, stepSucceeded)
		if doneEv.RV <= cleared.RV {
			t.Errorf("%s's step finished at rv %d, before Argo CD cleared the refresh (rv %d)", tc.release, doneEv.RV, cleared.RV)
		}
	}
}

// A Remove waits for a person's approval (rollout AwaitingApproval, runtime
// Stalled=True/AwaitingApproval, the Application untouched), then the applier arms the
// Application (delete-rollout annotation and resources finalizer) and deletes it, and Argo CD
// deletes the release's resources before the Application goes.
func TestRemoveWaitsForApprovalThenArgoCDDeletesTheRelease(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	_, spec := current(t, s)
	ensure(t, s, fullBundle(t, s), spec)
	const release, ns = "dcgm-exporter", "dcgm-exporter"
	before := stacktest.Application(t, s, release)
	deploys, cms := s.Kube.AppsV1().Deployments(ns), s.Kube.CoreV1().ConfigMaps(ns)
	if _, err := deploys.Get(ctx, release+"-controller", metav1.GetOptions{}); err != nil {
		t.Fatalf("the release's Deployment before the Remove: %v", err)
	}
	if _, err := cms.Get(ctx, release+"-config", metav1.GetOptions{}); err != nil {
		t.Fatalf("the release's ConfigMap before the Remove: %v", err)
	}
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)

	ro := change(t, s, bundleWithout(t, s, release), spec)
	stacktest.StepOf(t, ro, release, v1alpha1.ActionRemove)
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonAwaitingApproval); err != nil {
		t.Fatal(err)
	}
	waiting, err := s.Rollout(ctx, ro.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rm, _ := stacktest.FindStep(waiting, release); rm.State != v1alpha1.StepAwaitingApproval || rm.StartedAt != nil || waiting.Status.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("before approval: rollout %s, step %s started %v; want AwaitingApproval, not started", waiting.Status.Phase, rm.State, rm.StartedAt)
	}
	app := stacktest.Application(t, s, release)
	if app.UID != before.UID || app.DeletionTimestamp != nil || app.Annotations[v1alpha1.AnnotationDeleteRollout] != "" || slices.Contains(app.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		t.Fatalf("before approval the Application was touched: uid %s (was %s), deletion %v, annotations %v, finalizers %v",
			app.UID, before.UID, app.DeletionTimestamp, app.Annotations, app.Finalizers)
	}

	approve(t, s, ro.Name, "e2e: dcgm-exporter leaves the bundle")
	err = testenv.WaitFor(ctx, goneTimeout, "Application "+release+" and its Deployment and ConfigMap deleted", func(ctx context.Context) (bool, error) {
		_, aerr := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, release, metav1.GetOptions{})
		_, derr := deploys.Get(ctx, release+"-controller", metav1.GetOptions{})
		_, cerr := cms.Get(ctx, release+"-config", metav1.GetOptions{})
		if apierrors.IsNotFound(aerr) && apierrors.IsNotFound(derr) && apierrors.IsNotFound(cerr) {
			return true, nil
		}
		return false, fmt.Errorf("application: %v; deployment: %v; configmap: %v", aerr, derr, cerr)
	})
	if err != nil {
		t.Fatal(err)
	}
	done := waitRolloutDone(t, s, ro.Name)
	if rm, _ := stacktest.FindStep(done, release); rm.State != v1alpha1.StepSucceeded {
		t.Errorf("Remove step %s, want Succeeded", rm.State)
	}
	waitRolledOut(t, s)

	// What the Application went through: armed by the operator, deleted, then gone; always the
	// same object.
	armed, _, ok := apps.FirstApp(t, release, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationDeleteRollout] == ro.Name && slices.Contains(a.Finalizers, v1alpha1.ArgoResourcesFinalizer)
	})
	if !ok {
		t.Fatalf("no recorded version of %s carries delete-rollout=%s with the resources finalizer", release, ro.Name)
	}
	deleting, _, ok := apps.FirstApp(t, release, func(a *argoapp.Application) bool { return a.DeletionTimestamp != nil })
	if !ok || deleting.RV < armed.RV {
		t.Fatalf("the Application was not deleted after it was armed (armed rv %d, deleting %v)", armed.RV, ok)
	}
	var deleted bool
	for _, e := range apps.Of(t, release) {
		if e.Object.GetUID() != before.UID {
			t.Errorf("recorded %s %s with uid %s, not the removed Application's %s", e.Type, release, e.Object.GetUID(), before.UID)
		}
		deleted = deleted || e.Type == watch.Deleted
	}
	if !deleted {
		t.Errorf("no deletion of %s was recorded", release)
	}

	t.Run("a recreated namesake is never deleted", func(t *testing.T) {
		recreatedNamesakeIsNeverDeleted(t, s, release, spec)
	})
	t.Run("a namesake created inside the applier's create is never adopted", func(t *testing.T) {
		namesakeCreatedInsideTheCreateIsNeverAdopted(t, s, release, spec)
	})
}

// namesakeCreatedInsideTheCreateIsNeverAdopted installs release again (it is gone, removed by
// the test before), and someone else creates an Application under its name between the
// applier's read (nothing there) and its write: a webhook of the test's holds the applier's
// create while it makes the namesake. The applier creates, never applies, an Application it
// did not find, so its write fails (AlreadyExists), the name is read again and is foreign, and
// the rollout fails with ForeignObject; the namesake is untouched (a forced apply took it over
// and labelled it the operator's). Deleting it, then the failed rollout, completes the install.
func namesakeCreatedInsideTheCreateIsNeverAdopted(t *testing.T, s *stack.Stack, release string, spec v1alpha1.ClusterRuntimeSpec) {
	ctx := t.Context()
	apps := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
	if _, err := apps.Get(ctx, release, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("application %s before the install: %v; want it gone", release, err)
	}
	var probed, swapped atomic.Bool
	var namesake atomic.Pointer[argoapp.Application]
	var swapErr atomic.Pointer[error]
	stop, err := s.Intercept(ctx, "e2e-namesake-create", []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, func(req *admissionv1.AdmissionRequest) {
		if req.Name != release {
			return
		}
		if req.DryRun != nil && *req.DryRun {
			probed.Store(true)
			return
		}
		if req.UserInfo.Username != stack.Identity("applier") || swapped.Swap(true) {
			return
		}
		// Inside the applier's write of the new Application: someone else's comes first.
		created, err := createForeign(context.Background(), s, release, false)
		if err != nil {
			swapErr.Store(&err)
			return
		}
		namesake.Store(created)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the test's webhook called", func(ctx context.Context) (bool, error) {
		if _, err := createForeign(ctx, s, release, true); err != nil {
			return false, err
		}
		return probed.Load(), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	ro := change(t, s, fullBundle(t, s), spec)
	stacktest.StepOf(t, ro, release, v1alpha1.ActionInstall)
	rt, err := s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolloutFailed)
	if err != nil {
		t.Fatal(err)
	}
	if p := swapErr.Load(); p != nil {
		t.Fatalf("the namesake was not put in place: %v", *p)
	}
	created := namesake.Load()
	if !swapped.Load() || created == nil {
		t.Fatalf("the applier's write of %s never reached the test's webhook", release)
	}
	if c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionStalled); c == nil || !strings.Contains(c.Message, v1alpha1.ReasonForeignObject) || !strings.Contains(c.Message, release) {
		t.Errorf("Stalled=True RolloutFailed message %q does not name %s and ForeignObject", c.Message, release)
	}
	live := stacktest.Application(t, s, release)
	// Untouched: the same object, with the spec, labels, annotations and finalizers it was
	// created with (and, below, no field of the operator's). Its resourceVersion is not compared:
	// Argo CD's controller writes the status of every Application it finds, this one too (seen
	// in CI: rv 1374 to 1381 within the second the rollout failed).
	if live.UID != created.UID || !reflect.DeepEqual(live.Spec, created.Spec) || !maps.Equal(live.Labels, created.Labels) ||
		!maps.Equal(live.Annotations, created.Annotations) || !slices.Equal(live.Finalizers, created.Finalizers) {
		t.Fatalf("the namesake %s (uid %s) was written: uid %s, labels %v, annotations %v, finalizers %v, spec %+v (created with %+v)",
			release, created.UID, live.UID, live.Labels, live.Annotations, live.Finalizers, live.Spec, created.Spec)
	}
	for _, e := range live.ManagedFields {
		if strings.HasPrefix(e.Manager, v1alpha1.FieldManager) {
			t.Errorf("the namesake has fields managed by %s", e.Manager)
		}
	}

	// The person deletes their namesake, and the failed rollout to try again: the install ends.
	stop()
	if err := apps.Delete(ctx, release, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Delete(ctx, ro.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "rollout "+ro.Name+" created again", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, ro.Name)
		if err != nil {
			return false, err
		}
		return r.UID != ro.UID && len(r.Status.Steps) > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitRolloutDone(t, s, ro.Name)
	waitRolledOut(t, s)
}

// recreatedNamesakeIsNeverDeleted removes release again, and recreates it under the same name
// (someone else's, foreign) between the applier's read of the Application and its delete: a
// webhook of the test's holds the applier's DELETE while it deletes the original and creates
// the namesake. The API server then finds another UID than the delete's precondition names and
// refuses it; the applier reads again, finds a foreign Application, and the rollout fails with
// ForeignObject. The namesake is untouched. Deleting it, then the failed rollout, completes the
// Remove.
func recreatedNamesakeIsNeverDeleted(t *testing.T, s *stack.Stack, release string, spec v1alpha1.ClusterRuntimeSpec) {
	ctx := t.Context()
	ensure(t, s, fullBundle(t, s), spec)
	apps := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
	original := stacktest.Application(t, s, release)

	var probed, swapped atomic.Bool
	var namesake atomic.Pointer[argoapp.Application]
	var swapErr atomic.Pointer[error]
	stop, err := s.Intercept(ctx, "e2e-namesake", []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, func(req *admissionv1.AdmissionRequest) {
		if req.Name != release {
			return
		}
		if req.DryRun != nil && *req.DryRun {
			probed.Store(true)
			return
		}
		if req.UserInfo.Username != stack.Identity("applier") || swapped.Swap(true) {
			return
		}
		// Inside the applier's DELETE of the original: it goes, and a namesake comes.
		fail := func(err error) { swapErr.Store(&err) }
		bg := context.Background()
		if _, err := apps.Patch(bg, release, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{FieldManager: stacktest.Person}); err != nil {
			fail(fmt.Errorf("take the finalizer off the original: %w", err))
			return
		}
		uid := original.UID
		if err := apps.Delete(bg, release, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			fail(fmt.Errorf("delete the original: %w", err))
			return
		}
		created, err := createForeign(bg, s, release, false)
		if err != nil {
			fail(err)
			return
		}
		namesake.Store(created)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the test's webhook called", func(ctx context.Context) (bool, error) {
		if err := apps.Delete(ctx, release, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, err
		}
		return probed.Load(), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	ro := change(t, s, bundleWithout(t, s, release), spec)
	stacktest.StepOf(t, ro, release, v1alpha1.ActionRemove)
	approve(t, s, ro.Name, "e2e: dcgm-exporter leaves the bundle again")
	rt, err := s.WaitCondition(ctx, goneTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolloutFailed)
	if err != nil {
		t.Fatal(err)
	}
	if p := swapErr.Load(); p != nil {
		t.Fatalf("the namesake was not put in place: %v", *p)
	}
	created := namesake.Load()
	if !swapped.Load() || created == nil {
		t.Fatalf("the applier's DELETE of %s never reached the test's webhook", release)
	}
	if c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionStalled); c == nil || !strings.Contains(c.Message, v1alpha1.ReasonForeignObject) || !strings.Contains(c.Message, release) {
		t.Errorf("Stalled=True RolloutFailed message %q does not name %s and ForeignObject", c.Message, release)
	}
	live := stacktest.Application(t, s, release)
	if live.UID != created.UID || live.DeletionTimestamp != nil || len(live.Finalizers) != 0 || live.Annotations[v1alpha1.AnnotationDeleteRollout] != "" {
		t.Fatalf("the namesake %s (uid %s) was touched: uid %s, deletion %v, finalizers %v, annotations %v",
			release, created.UID, live.UID, live.DeletionTimestamp, live.Finalizers, live.Annotations)
	}
	for _, e := range live.ManagedFields {
		if strings.HasPrefix(e.Manager, v1alpha1.FieldManager) {
			t.Errorf("the namesake has fields managed by %s", e.Manager)
		}
	}

	// The person deletes their namesake, and the failed rollout to try again: the Remove ends.
	stop()
	if err := apps.Delete(ctx, release, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Delete(ctx, ro.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "rollout "+ro.Name+" created again", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, ro.Name)
		if err != nil {
			return false, err
		}
		return r.UID != ro.UID && len(r.Status.Steps) > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	approve(t, s, ro.Name, "e2e: dcgm-exporter leaves the bundle again")
	waitRolloutDone(t, s, ro.Name)
	waitRolledOut(t, s)
}

// createForeign creates someone else's Application under name: another project and
// destination, no sync policy, none of the operator's labels or annotations (only tried when
// dryRun is set).
func createForeign(ctx context.Context, s *stack.Stack, name string, dryRun bool) (*argoapp.Application, error) {
	app := &argoapp.Application{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stack.EngineNamespace, Labels: map[string]string{"team": "someone-else"}},
		Spec: argoapp.ApplicationSpec{
			Project:     "default",
			Source:      &argoapp.ApplicationSource{RepoURL: "oci://" + s.Repository + "/charts/cert-manager", Path: ".", TargetRevision: s.Digests["cert-manager"]},
			Destination: argoapp.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: "e2e-someone-else"},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		return nil, err
	}
	delete(obj, "status")
	u, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).
		Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: stacktest.Person, DryRun: dryRunAll(dryRun)})
	if err != nil {
		return nil, fmt.Errorf("create the namesake %s: %w", name, err)
	}
	return stacktest.DecodeApplication(u)
}

func dryRunAll(on bool) []string {
	if on {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// suspendEngine=true writes every owned Application with automated sync off
// (Ready=False/EngineSuspended); false writes it on again and the runtime is Ready.
func TestSuspendEngineTurnsAutomatedSyncOffAndOn(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	bundle, spec := current(t, s)
	ensure(t, s, bundle, spec)
	suspended := *spec.DeepCopy()
	suspended.SuspendEngine = true
	apply(t, s, bundle, suspended)
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonEngineSuspended); err != nil {
		t.Fatal(err)
	}
	waitAutomated(t, s, false)

	apply(t, s, bundle, spec)
	waitAutomated(t, s, true)
	waitRolledOut(t, s)
}

// waitAutomated waits until every owned Application's automated sync is enabled (or not).
func waitAutomated(t *testing.T, s *stack.Stack, enabled bool) {
	t.Helper()
	rt, err := s.Runtime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := releasesOf(t, s, rt.Status.ActivePlan)
	err = testenv.WaitFor(t.Context(), stacktest.ChangeTimeout, fmt.Sprintf("automated sync enabled=%t on %d Applications", enabled, len(want)), func(ctx context.Context) (bool, error) {
		apps, err := ownedApplications(ctx, s)
		if err != nil {
			return false, err
		}
		if len(apps) != len(want) {
			return false, fmt.Errorf("%d owned Applications, want %d", len(apps), len(want))
		}
		var wrong []string
		for _, a := range apps {
			sp := a.Spec.SyncPolicy
			if sp == nil || sp.Automated == nil || sp.Automated.Enabled == nil || *sp.Automated.Enabled != enabled {
				wrong = append(wrong, a.Name)
			}
		}
		if len(wrong) > 0 {
			return false, fmt.Errorf("not yet: %v", wrong)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// releasesOf lists the releases of the stored plan with digest.
func releasesOf(t *testing.T, s *stack.Stack, digest string) []string {
	t.Helper()
	cm, err := s.Kube.CoreV1().ConfigMaps(stack.OperatorNamespace).Get(t.Context(), plan.ConfigMapName(digest), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read plan %s: %v", digest, err)
	}
	p, err := plan.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range p.Releases {
		out = append(out, r.Name)
	}
	return out
}

// paused=true keeps a new rollout's steps from starting (Ready=False/Paused) while the desired
// plan moves; unpausing lets the rollout finish.
func TestPausedHoldsANewRolloutsSteps(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	bundle, spec := current(t, s)
	rt := ensure(t, s, bundle, spec)
	from := rt.Status.ActivePlan
	// The change: dcgm-exporter back into the bundle (or, if it is there, a new driver version).
	next, nextSpec := fullBundle(t, s), spec
	if string(next) == string(bundle) {
		_, nextSpec = upgradeGPUOperator(t, s)
	}

	paused := *spec.DeepCopy()
	paused.Paused = true
	apply(t, s, bundle, paused)
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPaused); err != nil {
		t.Fatal(err)
	}
	pausedNext := *nextSpec.DeepCopy()
	pausedNext.Paused = true
	apply(t, s, next, pausedNext)
	err := testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the desired plan moves while paused", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		c := readyOf(r)
		if r.Status.DesiredPlan == "" || r.Status.DesiredPlan == from || c.Reason != v1alpha1.ReasonPaused || c.ObservedGeneration != r.Generation {
			return false, fmt.Errorf("desired %s, Ready %s/%s", r.Status.DesiredPlan, c.Status, c.Reason)
		}
		rt = r
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Status.ActivePlan != from {
		t.Errorf("active plan moved to %s while paused", rt.Status.ActivePlan)
	}
	if rt.Status.Rollout != "" {
		if ro, err := s.Rollout(ctx, rt.Status.Rollout); err == nil && ro.Spec.ToDigest == rt.Status.DesiredPlan {
			for _, st := range ro.Status.Steps {
				if st.StartedAt != nil || st.State != v1alpha1.StepPending {
					t.Errorf("paused, yet step %d %s is %s (started %v)", st.Index, st.Release, st.State, st.StartedAt)
				}
			}
		}
	}

	apply(t, s, next, nextSpec)
	ro := stacktest.NewRollout(t, s, from)
	waitRolloutDone(t, s, ro.Name)
	waitRolledOut(t, s)
}

// With deletionPolicy Delete, deleting the ClusterRuntime removes every release in reverse
// dependency order under an approved RuntimeDeleted rollout, then releases the runtime's
// finalizer. Last: it leaves no runtime.
func TestDeletionPolicyDeleteRemovesEveryReleaseInReverseOrder(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	bundle, spec := current(t, s)
	ensure(t, s, bundle, spec)
	del := *spec.DeepCopy()
	del.DeletionPolicy = v1alpha1.DeletionPolicyDelete
	apply(t, s, bundle, del)
	err := testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the planner's finalizer on the runtime", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		return slices.Contains(r.Finalizers, v1alpha1.RuntimeFinalizer), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := waitRolledOut(t, s)
	releases := releasesOf(t, s, rt.Status.ActivePlan)
	rollouts := stacktest.Record(t, s, v1alpha1.RuntimeRolloutResource, "")

	if err := s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).Delete(ctx, v1alpha1.RuntimeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	applied.set = false
	var ro *v1alpha1.RuntimeRollout
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "a RuntimeDeleted rollout awaiting approval", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		if r.DeletionTimestamp == nil || r.Status.Rollout == "" {
			return false, fmt.Errorf("deletion %v, rollout %q", r.DeletionTimestamp, r.Status.Rollout)
		}
		x, err := s.Rollout(ctx, r.Status.Rollout)
		if err != nil {
			return false, err
		}
		if x.Spec.Reason != v1alpha1.RolloutReasonRuntimeDeleted || x.Status.Phase != v1alpha1.PhaseAwaitingApproval {
			return false, fmt.Errorf("rollout %s reason %s phase %s", x.Name, x.Spec.Reason, x.Status.Phase)
		}
		ro = x
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Spec.FromDigest != rt.Status.ActivePlan || ro.Spec.ToDigest != "" || len(ro.Status.Steps) != len(releases) {
		t.Fatalf("rollout %s: %s -> %q with %d steps, want from the active plan %s to none with %d", ro.Name, ro.Spec.FromDigest, ro.Spec.ToDigest, len(ro.Status.Steps), rt.Status.ActivePlan, len(releases))
	}
	for _, st := range ro.Status.Steps {
		if st.Action != v1alpha1.ActionRemove || st.StartedAt != nil {
			t.Fatalf("before approval: step %d %s %s started %v", st.Index, st.Release, st.Action, st.StartedAt)
		}
	}
	if apps, err := ownedApplications(ctx, s); err != nil || len(apps) != len(releases) {
		t.Fatalf("before approval: %d owned Applications (%v), want %d", len(apps), err, len(releases))
	}

	approve(t, s, ro.Name, "e2e: the runtime is deleted with deletionPolicy Delete")
	err = testenv.WaitFor(ctx, stacktest.RolloutTimeout, "the ClusterRuntime gone", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("still there: %s; progress %q", stack.Blocker(r), r.Status.Progress)
	})
	if err != nil {
		t.Fatal(err)
	}
	if apps, err := ownedApplications(ctx, s); err != nil || len(apps) != 0 {
		t.Errorf("after deletion: %d owned Applications (%v), want none", len(apps), err)
	}
	for _, c := range stack.ExampleComponents() {
		if !slices.Contains(releases, c.Name) {
			continue
		}
		if _, err := s.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.Name+"-config", metav1.GetOptions{}); c.Name != "gpu-operator-readiness" && !apierrors.IsNotFound(err) {
			t.Errorf("%s's ConfigMap %s/%s-config: %v, want deleted", c.Name, c.Namespace, c.Name, err)
		}
		// A release's removal finished before the removal of anything it depends on began (the
		// planner records the one and starts the other in the same status write, so the
		// resourceVersions may be equal).
		for _, d := range c.DependsOn {
			goneEv, gone := rollouts.FirstStep(t, ro.Name, c.Name, stepSucceeded)
			startEv, start := rollouts.FirstStep(t, ro.Name, d, func(st v1alpha1.Step) bool { return st.StartedAt != nil })
			if startEv.RV < goneEv.RV || start.StartedAt.Before(gone.FinishedAt) {
				t.Errorf("%s's removal started (rv %d, %s) before %s's removal finished (rv %d, %s)", d, startEv.RV, start.StartedAt, c.Name, goneEv.RV, gone.FinishedAt)
			}
		}
	}
}

func opPhase(app *argoapp.Application) string {
	if app.Status.OperationState == nil {
		return "none"
	}
	return string(app.Status.OperationState.Phase)
}

func infoValue(info []*argoapp.Info, name string) string {
	for _, i := range info {
		if i != nil && i.Name == name {
			return i.Value
		}
	}
	return ""
}

func jobComplete(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func readyOf(rt *v1alpha1.ClusterRuntime) metav1.Condition {
	for _, c := range rt.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

func driverVersionOf(spec v1alpha1.ClusterRuntimeSpec) string {
	for _, o := range spec.Overrides {
		if o.Component == "gpu-operator" && o.Path == "driver.version" {
			return string(o.Value.Raw)
		}
	}
	return ""
}
