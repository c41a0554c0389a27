//go:build integration

package appwriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// resultTimeout bounds waiting for a published result or a benchmark run.
const resultTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

var nsCounter atomic.Int32

// world is a Writer on the real API server, in namespaces of its own, publishing to an
// in-process JetStream.
type world struct {
	w    *Writer
	apps *argoapp.Applications
	// others writes Applications as Argo CD or a person does (Create, Update): test only, the
	// operator's client has neither.
	others *gentype.Client[*argoapp.Application]
	kube   kubernetes.Interface
	ns     string
	opNS   string
	plans  map[string]*plan.Plan
	js     *natstest.Server
	hooked *hookedApps
}

// hookedApps is the real Application client with a test hook before each delete: a person acting
// between the writer's read and its delete.
type hookedApps struct {
	Applications
	beforeDelete func()
	// beforeCreate and beforeMerge run once, before the next create and the next JSON merge
	// patch: someone acting between the writer's read and that write.
	beforeCreate, beforeMerge func()
	// gets and patches count the requests (benchmarks).
	gets, patches atomic.Int64
}

func (h *hookedApps) Get(ctx context.Context, name string, opts metav1.GetOptions) (*argoapp.Application, error) {
	h.gets.Add(1)
	return h.Applications.Get(ctx, name, opts)
}

func (h *hookedApps) Create(ctx context.Context, body []byte, opts metav1.CreateOptions) (*argoapp.Application, error) {
	if f := h.beforeCreate; f != nil {
		h.beforeCreate = nil
		f()
	}
	return h.Applications.Create(ctx, body, opts)
}

func (h *hookedApps) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*argoapp.Application, error) {
	if f := h.beforeMerge; f != nil && pt == types.MergePatchType {
		h.beforeMerge = nil
		f()
	}
	h.patches.Add(1)
	return h.Applications.Patch(ctx, name, pt, data, opts, sub...)
}

func (h *hookedApps) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if f := h.beforeDelete; f != nil {
		h.beforeDelete = nil
		f()
	}
	return h.Applications.Delete(ctx, name, opts)
}

func newWorld(t testing.TB, messages ...string) *world {
	t.Helper()
	env := testenv.Current(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	argo, err := argoapp.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := nsCounter.Add(1)
	w := &world{kube: kube, ns: fmt.Sprintf("aw-argocd-%d", n), opNS: fmt.Sprintf("aw-system-%d", n), plans: map[string]*plan.Plan{}}
	for _, ns := range []string{w.ns, w.opNS} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	if len(messages) == 0 {
		messages = []string{"hello"}
	}
	for _, m := range messages {
		p, cm := testPlan(t, m)
		cm.Namespace = w.opNS
		if _, err := kube.CoreV1().ConfigMaps(w.opNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("store plan: %v", err)
		}
		w.plans[m] = p
	}
	w.apps = argo.Applications(w.ns)
	w.others = gentype.NewClient(argoapp.ResourceApplications, argo.RESTClient(), metav1.ParameterCodec, w.ns, func() *argoapp.Application { return &argoapp.Application{} })
	w.hooked = &hookedApps{Applications: w.apps}
	w.js = natstest.Start(t)
	_, js := w.js.Connect(t)
	if err := dispatch.EnsureStreams(ctx, js, 1); err != nil {
		t.Fatalf("streams: %v", err)
	}
	s := testSettings()
	s.EngineNamespace = w.ns
	rollouts, err := NewRollouts(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := New(Config{Rollouts: rollouts, Apps: w.hooked, Plans: plan.NewCache(plan.GetLoader(kube.CoreV1().ConfigMaps(w.opNS)), 0), Publisher: bus.NewPublisher(js, "applier-test"), Settings: s})
	if err != nil {
		t.Fatalf("new writer: %v", err)
	}
	w.w = writer
	return w
}

func (w *world) get(t testing.TB, name string) *argoapp.Application {
	t.Helper()
	app, err := w.apps.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return app
}

func (w *world) apply(t testing.TB, cmd *bus.ApplyCommand) *bus.ApplyResult {
	t.Helper()
	res, err := w.w.Apply(context.Background(), cmd)
	if err != nil {
		t.Fatalf("apply %s: %v", cmd.ID, err)
	}
	return res
}

// ownerOf returns the field managers owning the annotation key, in managedFields order.
func ownerOf(app *argoapp.Application, fieldPath string) []string {
	var out []string
	for _, mf := range app.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), fieldPath) {
			out = append(out, mf.Manager+"/"+string(mf.Operation))
		}
	}
	return out
}

func TestIntegrationCreateUpdateNoop(t *testing.T) {
	w := newWorld(t, "hello", "upgraded")
	ctx := context.Background()
	hello, upgraded := w.plans["hello"], w.plans["upgraded"]

	// create
	res := w.apply(t, applyCmd(hello, "gpu-operator", 1))
	if res.Outcome != bus.OutcomeWritten {
		t.Fatalf("create: outcome %s (%s)", res.Outcome, res.Message)
	}
	app := w.get(t, "gpu-operator")
	want, err := appspec.Build(w.w.settings, appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID, PlanDigest: hello.Digest(),
		Release: mustRelease(t, hello, "gpu-operator"), StepID: testRollout + "/1", StepStarted: applyCmd(hello, "gpu-operator", 1).Step.Started})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, app.Spec); diff != "" {
		t.Errorf("stored spec differs from appspec.Build (-want +got):\n%s", diff)
	}
	if len(app.Finalizers) != 0 {
		t.Errorf("finalizers %v; want none", app.Finalizers)
	}
	if got := ownerOf(app, `"f:spec"`); !cmp.Equal(got, []string{"aicr-operator/Apply"}) {
		t.Errorf("spec owned by %v; want aicr-operator/Apply", got)
	}

	// update: new values
	res = w.apply(t, applyCmd(upgraded, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionUpgrade }))
	app = w.get(t, "gpu-operator")
	if res.Outcome != bus.OutcomeWritten || app.Annotations[v1alpha1.AnnotationStepWrite] != v1alpha1.StepWriteChanged {
		t.Errorf("update: outcome %s, step-write %q; want Written, changed", res.Outcome, app.Annotations[v1alpha1.AnnotationStepWrite])
	}
	if !strings.Contains(string(app.Spec.Source.Helm.ValuesObject.Raw), `"message":"upgraded"`) {
		t.Errorf("values not updated: %s", app.Spec.Source.Helm.ValuesObject.Raw)
	}

	// no-op at a new step: unchanged, refresh requested in a separate patch
	res = w.apply(t, applyCmd(upgraded, "gpu-operator", 3, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply }))
	app = w.get(t, "gpu-operator")
	if res.Outcome != bus.OutcomeRefreshed {
		t.Errorf("no-op: outcome %s; want Refreshed", res.Outcome)
	}
	wantAnn := map[string]string{v1alpha1.AnnotationStep: testRollout + "/3", v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteUnchanged,
		v1alpha1.AnnotationRefreshFor: stepToken(3), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal}
	if diff := cmp.Diff(wantAnn, annotations(app, v1alpha1.AnnotationStep, v1alpha1.AnnotationStepWrite, v1alpha1.AnnotationRefreshFor, v1alpha1.AnnotationArgoRefresh)); diff != "" {
		t.Errorf("no-op annotations (-want +got):\n%s", diff)
	}
	if got := ownerOf(app, `"f:argocd.argoproj.io/refresh"`); !cmp.Equal(got, []string{"aicr-operator/Update"}) {
		t.Errorf("refresh annotation owned by %v; want only the merge patch (aicr-operator/Update), never the applied manifest", got)
	}

	// Argo CD takes the annotation away; a redelivery does not ask again.
	patch := `{"metadata":{"annotations":{"argocd.argoproj.io/refresh":null}}}`
	if _, err := w.apps.Patch(ctx, "gpu-operator", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "argocd-application-controller"}); err != nil {
		t.Fatalf("remove refresh annotation: %v", err)
	}
	before := w.get(t, "gpu-operator").ResourceVersion
	res = w.apply(t, applyCmd(upgraded, "gpu-operator", 3))
	app = w.get(t, "gpu-operator")
	if res.Outcome != bus.OutcomeRefreshed || app.Annotations[v1alpha1.AnnotationArgoRefresh] != "" {
		t.Errorf("redelivery: outcome %s, refresh %q; want Refreshed without a second refresh", res.Outcome, app.Annotations[v1alpha1.AnnotationArgoRefresh])
	}
	if app.ResourceVersion != before {
		t.Errorf("redelivery wrote the Application (resourceVersion %s -> %s); a same-step no-op must not", before, app.ResourceVersion)
	}
}

func TestIntegrationForeignUntouched(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	theirs := &argoapp.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Namespace: w.ns, Labels: map[string]string{v1alpha1.LabelManagedBy: "argocd-autopilot"}},
		Spec: argoapp.ApplicationSpec{Project: "default", Source: &argoapp.ApplicationSource{RepoURL: "https://example.com/theirs", Path: "x"},
			Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: "theirs"}},
	}
	created, err := w.others.Create(ctx, theirs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create foreign: %v", err)
	}
	res := w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 1))
	if res.Outcome != bus.OutcomeForeign || res.Reason != v1alpha1.ReasonForeignObject || !strings.Contains(res.Message, `"argocd-autopilot"`) {
		t.Errorf("apply: %s/%s %q; want Foreign/ForeignObject with the owner evidence", res.Outcome, res.Reason, res.Message)
	}
	rres, err := w.w.Remove(ctx, removeCmd("gpu-operator", 2))
	if err != nil || rres.Outcome != bus.OutcomeForeign {
		t.Errorf("remove: %+v, %v; want Foreign", rres, err)
	}
	if got := w.get(t, "gpu-operator"); got == nil || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("the foreign Application was written or deleted")
	}
}

func TestIntegrationReadinessSyncDoesNotClobberARunningOperation(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const gate = "gpu-readiness"
	hello := w.plans["hello"]
	if res := w.apply(t, applyCmd(hello, gate, 1)); res.Outcome != bus.OutcomeSyncStarted {
		t.Fatalf("first step: outcome %s; want SyncStarted", res.Outcome)
	}
	// Argo CD picks our operation up and, later, another one runs: write that state as the
	// controller would (no status subresource: an update writes status).
	app := w.get(t, gate)
	app.Operation = nil
	app.Status.OperationState = &argoapp.OperationState{Phase: argoapp.OperationRunning, StartedAt: metav1.Now(),
		Operation: argoapp.Operation{InitiatedBy: argoapp.OperationInitiator{Automated: true}, Sync: &argoapp.SyncOperation{Revision: "sha256:old"}}}
	if _, err := w.others.Update(ctx, app, metav1.UpdateOptions{FieldManager: "argocd-application-controller"}); err != nil {
		t.Fatalf("write running operation: %v", err)
	}
	_, err := w.w.Apply(ctx, applyCmd(hello, gate, 2))
	var notYet *dispatch.NotYetError
	if !errors.As(err, &notYet) {
		t.Fatalf("Apply with a running operation = %v; want NotYet", err)
	}
	app = w.get(t, gate)
	if app.Operation != nil || app.Status.OperationState == nil || app.Status.OperationState.Phase != argoapp.OperationRunning ||
		!app.Status.OperationState.Operation.InitiatedBy.Automated {
		t.Fatalf("running operation clobbered: operation %+v, state %+v", app.Operation, app.Status.OperationState)
	}

	// It finishes; the redelivered command starts our sync and clears the old state.
	app.Status.OperationState.Phase = argoapp.OperationSucceeded
	if _, err := w.others.Update(ctx, app, metav1.UpdateOptions{FieldManager: "argocd-application-controller"}); err != nil {
		t.Fatalf("finish operation: %v", err)
	}
	res := w.apply(t, applyCmd(hello, gate, 2))
	app = w.get(t, gate)
	if res.Outcome != bus.OutcomeSyncStarted || app.Operation == nil {
		t.Fatalf("outcome %s, operation %+v; want SyncStarted with our operation", res.Outcome, app.Operation)
	}
	if app.Status.OperationState != nil {
		t.Errorf("operationState kept: %+v; the sync patch clears it", app.Status.OperationState)
	}
	op := app.Operation
	if op.InitiatedBy.Username != v1alpha1.FieldManager || !appspec.HasStepInfo(op.Info, stepToken(2)) ||
		!cmp.Equal(op.Sync.SyncOptions, appspec.SyncOptions()) || op.Sync.Revision != app.Spec.Source.TargetRevision {
		t.Errorf("operation = %+v; want ours for step 2 with the spec's syncOptions", op)
	}
	// A redelivery does not start a second one.
	rv := app.ResourceVersion
	if res := w.apply(t, applyCmd(hello, gate, 2)); res.Outcome != bus.OutcomeSyncStarted {
		t.Errorf("redelivery outcome %s", res.Outcome)
	}
	if got := w.get(t, gate).ResourceVersion; got != rv {
		t.Errorf("redelivery wrote the Application again (%s -> %s)", rv, got)
	}
}

// finishDeletion does what Argo CD does once the release's resources are gone: it removes the
// resources finalizer.
func (w *world) finishDeletion(t testing.TB, name string) {
	t.Helper()
	patch := `{"metadata":{"finalizers":null}}`
	if _, err := w.apps.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("remove finalizer of %s: %v", name, err)
	}
}

func TestIntegrationRemove(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 1))
	cmd := removeCmd("gpu-operator", 7)
	_, err := w.w.Remove(ctx, cmd)
	var notYet *dispatch.NotYetError
	if !errors.As(err, &notYet) {
		t.Fatalf("Remove = %v; want NotYet while Argo CD deletes", err)
	}
	app := w.get(t, "gpu-operator")
	if app == nil || app.DeletionTimestamp == nil || !hasResourcesFinalizer(app) || app.Annotations[v1alpha1.AnnotationDeleteRollout] != testRollout {
		t.Fatalf("Application %+v; want it deleting, held by the resources finalizer, annotated delete-rollout", app.ObjectMeta)
	}
	if app.Spec.Source == nil || app.Spec.Source.RepoURL == "" {
		t.Errorf("the removal apply dropped the spec Argo CD needs to delete the resources")
	}
	if _, err := w.w.Remove(ctx, cmd); !errors.As(err, &notYet) {
		t.Errorf("redelivery while deleting = %v; want NotYet", err)
	}
	w.finishDeletion(t, "gpu-operator")
	res, err := w.w.Remove(ctx, cmd)
	if err != nil || res.Outcome != bus.OutcomeRemoved {
		t.Fatalf("after deletion: %+v, %v; want Removed", res, err)
	}
}

func TestIntegrationRemoveNeverDeletesARecreatedNamesake(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 1))
	var newcomer *argoapp.Application
	w.hooked.beforeDelete = func() {
		// Between the writer's read and its delete, a person deletes ours and creates their own.
		w.finishDeletion(t, "gpu-operator")
		if err := w.apps.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ours: %v", err)
		}
		var err error
		newcomer, err = w.others.Create(ctx, &argoapp.Application{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Namespace: w.ns},
			Spec: argoapp.ApplicationSpec{Project: "default", Source: &argoapp.ApplicationSource{RepoURL: "https://example.com/mine", Path: "x"},
				Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: "mine"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("create namesake: %v", err)
		}
	}
	res, err := w.w.Remove(ctx, removeCmd("gpu-operator", 7))
	if err != nil || res.Outcome != bus.OutcomeForeign {
		t.Fatalf("Remove = %+v, %v; want Foreign after the UID precondition failed", res, err)
	}
	got := w.get(t, "gpu-operator")
	if got == nil || newcomer == nil || got.UID != newcomer.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the namesake did not survive: %+v", got)
	}
}

// TestIntegrationHandEditForcedBack: after another field manager edits fields the operator
// applies, an unforced apply conflicts (scenario 10 of the recorded Argo CD fixtures in
// readiness/internal/fences/testdata) and the writer's forced apply takes the fields back.
func TestIntegrationHandEditForcedBack(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	hello := w.plans["hello"]
	w.apply(t, applyCmd(hello, "gpu-operator", 1))
	force := true
	edit := fmt.Sprintf(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"gpu-operator","namespace":%q},`+
		`"spec":{"syncPolicy":{"automated":{"enabled":false}},"source":{"repoURL":%q,"helm":{"valuesObject":{"message":"by hand"}}}}}`,
		w.ns, appspec.RepoURL(testRepository, "charts/gpu-operator"))
	if _, err := w.apps.Patch(ctx, "gpu-operator", types.ApplyPatchType, []byte(edit), metav1.PatchOptions{FieldManager: "someone-else", Force: &force}); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	// What the operator's write would meet without force:
	body, err := manifest(mustBuild(t, w, hello, "gpu-operator", 2), v1alpha1.StepWriteChanged, guard{})
	if err != nil {
		t.Fatal(err)
	}
	noForce := false
	if _, err := w.apps.Patch(ctx, "gpu-operator", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &noForce}); !apierrors.IsConflict(err) {
		t.Fatalf("unforced apply after a hand edit = %v; want a conflict", err)
	}

	res := w.apply(t, applyCmd(hello, "gpu-operator", 2))
	if res.Outcome != bus.OutcomeWritten {
		t.Errorf("outcome %s; want Written (the values differed)", res.Outcome)
	}
	app := w.get(t, "gpu-operator")
	if e := app.Spec.SyncPolicy.Automated.Enabled; e == nil || !*e {
		t.Errorf("automated.enabled = %v; want true again", e)
	}
	if !strings.Contains(string(app.Spec.Source.Helm.ValuesObject.Raw), `"message":"hello"`) {
		t.Errorf("values = %s; want the planned message back", app.Spec.Source.Helm.ValuesObject.Raw)
	}
	if got := ownerOf(app, `"f:message"`); !cmp.Equal(got, []string{"aicr-operator/Apply"}) {
		t.Errorf("values.message owned by %v; want aicr-operator/Apply alone", got)
	}
}

// TestIntegrationCachedReads: the writer reads through the real Informer; a cached copy that
// the API server no longer holds (deleted, or changed) ends in a fresh read and a correct write,
// never in a refusal or a rejected write.
func TestIntegrationCachedReads(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf, err := NewInformer(w.apps, w.ns)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	defer func() { cancel(); <-done }() //nolint:errcheck // Run ends with the cancellation this causes
	w.w.cache = inf
	p := w.plans["hello"]

	if res := w.apply(t, applyCmd(p, "gpu-operator", 1)); res.Outcome != bus.OutcomeWritten {
		t.Fatalf("first write: %s (%s)", res.Outcome, res.Message)
	}
	eventually(t, "the informer holds the written Application", func() bool {
		app, ok := inf.Get("gpu-operator")
		return ok && app.Annotations[v1alpha1.AnnotationStep] == testRollout+"/1"
	})
	cached, _ := inf.Get("gpu-operator")
	if cached.ManagedFields != nil || cached.Operation != nil {
		t.Errorf("the cache keeps managedFields or the operation")
	}

	// Deleted behind the cache's back: a snapshot still holds it, the apply guarded by its
	// resourceVersion fails, and the fresh read finds nothing and creates it again.
	stale := snapshotCache{"gpu-operator": cached.DeepCopy()}
	w.w.cache = stale
	if err := w.apps.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res := w.apply(t, applyCmd(p, "gpu-operator", 2))
	if res.Outcome != bus.OutcomeWritten {
		t.Fatalf("write after a deletion the cache missed: %s (%s)", res.Outcome, res.Message)
	}
	if app := w.get(t, "gpu-operator"); app == nil || app.UID == cached.UID || app.Annotations[v1alpha1.AnnotationStep] != testRollout+"/2" ||
		app.Annotations[v1alpha1.AnnotationStepWrite] != v1alpha1.StepWriteChanged {
		t.Errorf("stored Application %+v; want a new one written by step 2, step-write changed", app)
	}

	// Changed behind the cache's back (Argo CD's status write): the guarded apply conflicts and
	// the fresh read decides again.
	live := w.get(t, "gpu-operator")
	w.w.cache = snapshotCache{"gpu-operator": live.DeepCopy()}
	patch := `{"status":{"health":{"status":"Healthy"}}}`
	if _, err := w.apps.Patch(ctx, "gpu-operator", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "argocd-application-controller"}); err != nil {
		t.Fatal(err)
	}
	if res := w.apply(t, applyCmd(p, "gpu-operator", 3)); res.Outcome != bus.OutcomeRefreshed {
		t.Errorf("write after a change the cache missed: %s (%s)", res.Outcome, res.Message)
	}
	if app := w.get(t, "gpu-operator"); app.Annotations[v1alpha1.AnnotationStep] != testRollout+"/3" {
		t.Errorf("step annotation %q after step 3", app.Annotations[v1alpha1.AnnotationStep])
	}
}

// eventually is servicetest.Eventually with these tests' resultTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servicetest.Eventually(t, resultTimeout, what, func() (bool, string) { return cond(), "" })
}

func mustBuild(t testing.TB, w *world, p *plan.Plan, release string, index int32) *argoapp.Application {
	t.Helper()
	cmd := applyCmd(p, release, index)
	app, err := appspec.Build(w.w.settings, appspec.Input{Runtime: cmd.Runtime, RuntimeUID: cmd.RuntimeUID, PlanDigest: cmd.PlanDigest,
		Release: mustRelease(t, p, release), StepID: cmd.Step.ID, StepStarted: cmd.Step.Started})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// benchReleases is how many Applications the benchmark writes in turn.
const benchReleases = 64

// benchPlan is a plan of benchReleases independent releases whose values carry variant.
func benchPlan(t testing.TB, variant string) *plan.Plan {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: bench, version: 1.0.0}\ncomponents:\n")
	for i := range benchReleases {
		fmt.Fprintf(&sb, "- {name: bench-%02d, namespace: bench, chart: {path: charts/bench, digest: \"sha256:%s\"}, values: {variant: %s, replicas: %d}}\n",
			i, hex('7'), variant, i)
	}
	b, err := plan.ParseBundle([]byte(sb.String()))
	if err != nil {
		t.Fatalf("parse bench bundle: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatalf("resolve bench plan: %v", err)
	}
	return p
}

// storePlan stores p's ConfigMap in the world's operator namespace.
func (w *world) storePlan(t testing.TB, p *plan.Plan) *plan.Plan {
	t.Helper()
	cm, err := p.ConfigMap(w.opNS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.kube.CoreV1().ConfigMaps(w.opNS).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("store plan: %v", err)
	}
	return p
}

// countingPublisher counts results and says when n arrived.
type countingPublisher struct {
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
	bad  []string
}

func (p *countingPublisher) Publish(_ context.Context, _, _ string, m bus.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := m.(*bus.ApplyResult); ok && r.Outcome != bus.OutcomeWritten && len(p.bad) < 5 {
		p.bad = append(p.bad, r.Outcome+": "+r.Message)
	}
	p.n++
	if p.n == p.want {
		close(p.done)
	}
	return nil
}

// BenchmarkApplyWrites measures Application writes per second through the real dispatch loop
// (JetStream work queue, N workers) against the real API server, reading through the Informer
// (cache=on) or with a GET per write (cache=off), and reports the API requests per write. Every
// command is a changed write: 64 releases alternate between two plans.
//
//	AICR_TOOLS_BIN=$(hack/tools.sh bindir etcd kube-apiserver) go test -tags integration -run '^$' -bench ApplyWrites ./applier/internal/appwriter
func BenchmarkApplyWrites(b *testing.B) {
	for _, cached := range []bool{false, true} {
		for _, workers := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("cache=%v/workers=%d", cached, workers), func(b *testing.B) { benchmarkApplyWrites(b, workers, cached) })
		}
	}
}

func benchmarkApplyWrites(b *testing.B, workers int, cached bool) {
	w := newWorld(b, "hello", "upgraded")
	ctx := context.Background()
	if cached {
		inf, err := NewInformer(w.apps, w.ns)
		if err != nil {
			b.Fatal(err)
		}
		ictx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- inf.Run(ictx) }()
		defer func() { stop(); <-done }() //nolint:errcheck // Run ends with the cancellation this causes
		w.w.cache = inf
	}
	_, js := w.js.Connect(b)
	cons, err := dispatch.EnsureConsumer(ctx, js, bus.ConsumerApplier, 1)
	if err != nil {
		b.Fatalf("consumer: %v", err)
	}
	pub := bus.NewPublisher(js, "bench")
	plans := []*plan.Plan{w.storePlan(b, benchPlan(b, "a")), w.storePlan(b, benchPlan(b, "b"))}
	for i := range b.N {
		release := fmt.Sprintf("bench-%02d", i%benchReleases)
		cmd := applyCmd(plans[(i/benchReleases)%2], release, int32(i+1))
		cmd.ID = fmt.Sprintf("bench/%d/%d", workers, i)
		if err := pub.Publish(ctx, bus.ApplySubject(testRuntime, release), cmd.ID, cmd); err != nil {
			b.Fatalf("publish: %v", err)
		}
	}
	counter := &countingPublisher{want: b.N, done: make(chan struct{})}
	w.w.pub = counter
	dctx, cancel := context.WithCancel(ctx)
	d := &dispatch.Dispatcher{Consumer: cons, Routes: w.w.Routes(), Workers: workers}
	errc := make(chan error, 1)
	b.ResetTimer()
	go func() { errc <- d.Run(dctx) }()
	select {
	case <-counter.done:
	case <-time.After(resultTimeout):
		b.Fatalf("%d of %d results within %s", counter.n, b.N, resultTimeout)
	}
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatalf("dispatch: %v", err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(float64(w.hooked.gets.Load())/float64(b.N), "gets/write")
	b.ReportMetric(float64(w.hooked.patches.Load())/float64(b.N), "patches/write")
	if len(counter.bad) > 0 {
		b.Logf("some commands were not plain writes: %v", counter.bad)
	}
}

// foreignApp is an Application someone else owns under name.
func foreignApp(ns, name string) *argoapp.Application {
	return &argoapp.Application{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{v1alpha1.LabelManagedBy: "argocd-autopilot"}},
		Spec: argoapp.ApplicationSpec{Project: "default", Source: &argoapp.ApplicationSource{RepoURL: "https://example.com/theirs", Path: "x"},
			Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: "theirs"}},
	}
}

// TestIntegrationCreateIsCreate: on the real API server, an Application someone creates under
// the name between the writer's read (nothing there) and its write is never taken over: the
// create fails, the name is read again, and the result is Foreign with the evidence. A create
// that goes through hands the fields to the operator's apply (one aicr-operator entry, Apply).
func TestIntegrationCreateIsCreate(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var theirs *argoapp.Application
	w.hooked.beforeCreate = func() {
		var err error
		if theirs, err = w.others.Create(ctx, foreignApp(w.ns, "gpu-operator"), metav1.CreateOptions{FieldManager: "argocd-autopilot"}); err != nil {
			t.Errorf("create the namesake: %v", err)
		}
	}
	res := w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 1))
	if res.Outcome != bus.OutcomeForeign || res.Reason != v1alpha1.ReasonForeignObject || !strings.Contains(res.Message, `"argocd-autopilot"`) {
		t.Errorf("apply: %s/%s %q; want Foreign/ForeignObject with the owner evidence", res.Outcome, res.Reason, res.Message)
	}
	if got := w.get(t, "gpu-operator"); theirs == nil || got == nil || got.ResourceVersion != theirs.ResourceVersion {
		t.Fatalf("the namesake was written or deleted")
	}

	res = w.apply(t, applyCmd(w.plans["hello"], "cert-manager", 1))
	if res.Outcome != bus.OutcomeWritten {
		t.Fatalf("create cert-manager: %s (%s)", res.Outcome, res.Message)
	}
	// The create's fields are the apply's; the one Update entry is the refresh handshake's
	// merge patch, holding its two annotations and nothing else.
	var ours []string
	for _, e := range w.get(t, "cert-manager").ManagedFields {
		if e.Manager != v1alpha1.FieldManager {
			continue
		}
		ours = append(ours, string(e.Operation))
		if want := `{"f:metadata":{"f:annotations":{"f:` + v1alpha1.AnnotationArgoRefresh + `":{},"f:` + v1alpha1.AnnotationRefreshFor + `":{}}}}`; e.Operation == metav1.ManagedFieldsOperationUpdate && (e.FieldsV1 == nil || string(e.FieldsV1.Raw) != want) {
			t.Errorf("aicr-operator's Update entry after a create holds %s; want the refresh handshake's annotations alone, %s", e.FieldsV1, want)
		}
	}
	if !cmp.Equal(ours, []string{"Apply", "Update"}) {
		t.Errorf("aicr-operator's managedFields entries after a create: %v; want [Apply Update]", ours)
	}
}

// TestIntegrationWritesAreHeldToTheUID: an Application replaced by a namesake (deleted, and
// created by someone else) between the writer's apply and its refresh patch is not refreshed:
// the refresh, held to the UID, fails, the name is read again and is Foreign.
func TestIntegrationWritesAreHeldToTheUID(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 1))
	var theirs *argoapp.Application
	w.hooked.beforeMerge = func() {
		if err := w.apps.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete: %v", err)
		}
		var err error
		if theirs, err = w.others.Create(ctx, foreignApp(w.ns, "gpu-operator"), metav1.CreateOptions{FieldManager: "argocd-autopilot"}); err != nil {
			t.Errorf("create the namesake: %v", err)
		}
	}
	res := w.apply(t, applyCmd(w.plans["hello"], "gpu-operator", 2)) // unchanged: a refresh follows the apply
	if res.Outcome != bus.OutcomeForeign {
		t.Errorf("apply: %s (%s); want Foreign", res.Outcome, res.Message)
	}
	got := w.get(t, "gpu-operator")
	if theirs == nil || got == nil || got.ResourceVersion != theirs.ResourceVersion || got.Annotations[v1alpha1.AnnotationRefreshFor] != "" {
		t.Errorf("the namesake was written: %+v", got)
	}
}

// TestIntegrationRepairRemovesWhatNobodyStates: a repair makes the Application exactly what the
// plan says, on the real API server: what another manager added (spec.sources, source.chart, a
// values key, a plan-decided annotation) and the operator's apply never owned is removed too.
func TestIntegrationRepairRemovesWhatNobodyStates(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	hello := w.plans["hello"]
	w.apply(t, applyCmd(hello, "gpu-operator", 1))
	edit := `{"metadata":{"annotations":{"` + v1alpha1.AnnotationReadinessGate + `":"true"}},` +
		`"spec":{"sources":[{"repoURL":"https://example.com/extra","path":"x"}],"source":{"chart":"other","helm":{"valuesObject":{"added":"by hand"}}}}}`
	if _, err := w.apps.Patch(ctx, "gpu-operator", types.MergePatchType, []byte(edit), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	repair := applyCmd(hello, "gpu-operator", 0, func(c *bus.ApplyCommand) {
		c.Step = bus.StepRef{ID: "repair/0123456789ab/edit", Started: testStarted}
		c.Action = v1alpha1.ActionApply
	})
	if res := w.apply(t, repair); res.Outcome != bus.OutcomeWritten {
		t.Errorf("repair: %s (%s); want Written", res.Outcome, res.Message)
	}
	got := w.get(t, "gpu-operator")
	want := mustBuild(t, w, hello, "gpu-operator", 2)
	if diff := cmp.Diff(toJSONMap(t, want.Spec), toJSONMap(t, got.Spec)); diff != "" {
		t.Errorf("spec after the repair (-plan +live):\n%s", diff)
	}
	if d := appspec.Detect(got, mustBuildFrom(t, w, hello, got)); !d.Empty() {
		t.Errorf("drift left after the repair: %+v", d)
	}
}

// mustBuildFrom builds the release as a drift comparer does: from the plan, with the live
// step annotations.
func mustBuildFrom(t *testing.T, w *world, p *plan.Plan, live *argoapp.Application) *argoapp.Application {
	t.Helper()
	rel, _ := p.Release(live.Name)
	s := testSettings()
	s.EngineNamespace = w.ns
	started, _ := time.Parse(time.RFC3339, live.Annotations[v1alpha1.AnnotationStepStarted])
	app, err := appspec.Build(s, appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID, PlanDigest: p.Digest(), Release: rel,
		StepID: live.Annotations[v1alpha1.AnnotationStep], StepStarted: started, StepRolloutUID: live.Annotations[v1alpha1.AnnotationStepRolloutUID]})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func toJSONMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// skewedStep is the step a planner whose clock is off by skew stamps for a rollout read from
// the API server: the start by its clock, the ordering token from the rollout.
func skewedStep(r *v1alpha1.RuntimeRollout, index int32, skew time.Duration) bus.StepRef {
	return bus.StepRef{Rollout: r.Name, Index: index, ID: fmt.Sprintf("%s/%d", r.Name, index), RolloutUID: string(r.UID),
		Started: time.Now().Add(skew).UTC(), Seq: r.ResourceVersion}
}

// TestIntegrationClocksApartDoNotReorderCommands: two planners whose clocks are 5 s apart, in
// either direction, start the steps of two rollouts one after the other (RuntimeRollouts in the
// real API server). The later rollout's command is carried out and a redelivery of the earlier
// rollout's command after it is Outdated, whatever the two starts say: the ordering tokens
// (the rollouts' resourceVersions) decide.
func TestIntegrationClocksApartDoNotReorderCommands(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Second, -5 * time.Second} {
		t.Run(fmt.Sprintf("first planner %+v, second %+v", skew, -skew), func(t *testing.T) {
			w := newWorld(t, "hello", "upgraded")
			ctx := context.Background()
			rollouts := w.rollouts(t)
			first := w.createRollout(t, rollouts, "r-first")
			earlier := applyCmd(w.plans["hello"], "gpu-operator", 1, func(c *bus.ApplyCommand) {
				c.Step = skewedStep(first, 1, skew)
				c.Header.ID = c.Step.ID + "/1"
			})
			if res := w.apply(t, earlier); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("the first rollout's step: %s (%s)", res.Outcome, res.Message)
			}
			w.endRollout(t, rollouts, first)
			second := w.createRollout(t, rollouts, "r-second")
			later := applyCmd(w.plans["upgraded"], "gpu-operator", 1, func(c *bus.ApplyCommand) {
				c.Step = skewedStep(second, 1, -skew)
				c.Header.ID = c.Step.ID + "/1"
				c.Action = v1alpha1.ActionUpgrade
			})
			if res := w.apply(t, later); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("the second rollout's step: %s (%s)", res.Outcome, res.Message)
			}
			written := w.get(t, "gpu-operator")
			res := w.apply(t, earlier) // redelivered after the later rollout wrote the release
			if res.Outcome != bus.OutcomeOutdated {
				t.Errorf("the first rollout's redelivered command: %s (%s); want Outdated", res.Outcome, res.Message)
			}
			if got := w.get(t, "gpu-operator"); got.ResourceVersion != written.ResourceVersion {
				t.Errorf("the Application was written again: step %s, plan %s", got.Annotations[v1alpha1.AnnotationStep], got.Annotations[v1alpha1.AnnotationPlanDigest])
			}
			rm, err := w.w.Remove(ctx, removeCmd("gpu-operator", 2, func(c *bus.RemoveCommand) { c.Step = skewedStep(first, 2, skew) }))
			if err != nil || rm.Outcome != bus.OutcomeOutdated {
				t.Errorf("the first rollout's redelivered remove: %+v, %v; want Outdated", rm, err)
			}
		})
	}
}

// A repair carries the Application it was decided from as its ordering token: delivered after
// a rollout's step wrote the release again (a late or redelivered message), it is Outdated and
// the step's write stands; decided from the Application as it is now, edits included, it is
// carried out.
func TestIntegrationARepairDecidedFromAnEarlierApplicationIsOutdated(t *testing.T) {
	w := newWorld(t, "hello", "upgraded")
	ctx := context.Background()
	const rel = "gpu-operator"
	if res := w.apply(t, applyCmd(w.plans["hello"], rel, 1)); res.Outcome != bus.OutcomeWritten {
		t.Fatalf("step 1: %s (%s)", res.Outcome, res.Message)
	}
	edit := []byte(`{"spec":{"source":{"helm":{"valuesObject":{"message":"hand"}}}}}`)
	if _, err := w.apps.Patch(ctx, rel, types.MergePatchType, edit, metav1.PatchOptions{FieldManager: "e2e-person"}); err != nil {
		t.Fatal(err)
	}
	seen := w.get(t, rel) // what the drift check read: step 1's write, edited
	stale := repairCmd(w.plans["hello"], rel, seen.ResourceVersion, basisOf(seen))
	if res := w.apply(t, applyCmd(w.plans["upgraded"], rel, 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionUpgrade })); res.Outcome != bus.OutcomeWritten {
		t.Fatalf("step 2: %s (%s)", res.Outcome, res.Message)
	}
	written := w.get(t, rel)
	if res := w.apply(t, stale); res.Outcome != bus.OutcomeOutdated || !strings.Contains(res.Message, testRollout+"/2") {
		t.Errorf("the repair decided before step 2: %s (%s), want Outdated naming step 2", res.Outcome, res.Message)
	}
	if got := w.get(t, rel); got.ResourceVersion != written.ResourceVersion {
		t.Errorf("the repair wrote over step 2: step %s, plan %s", got.Annotations[v1alpha1.AnnotationStep], got.Annotations[v1alpha1.AnnotationPlanDigest])
	}

	if _, err := w.apps.Patch(ctx, rel, types.MergePatchType, edit, metav1.PatchOptions{FieldManager: "e2e-person"}); err != nil {
		t.Fatal(err)
	}
	seen = w.get(t, rel)
	fresh := repairCmd(w.plans["upgraded"], rel, seen.ResourceVersion, basisOf(seen))
	if res := w.apply(t, fresh); res.Outcome != bus.OutcomeWritten {
		t.Fatalf("the repair decided from the live Application: %s (%s), want Written", res.Outcome, res.Message)
	}
	if got := w.get(t, rel); got.Annotations[v1alpha1.AnnotationStep] != fresh.Step.ID || !strings.Contains(string(got.Spec.Source.Helm.ValuesObject.Raw), `"message":"upgraded"`) {
		t.Errorf("after the repair: step %s, values %s; want the repair's write of plan upgraded", got.Annotations[v1alpha1.AnnotationStep], got.Spec.Source.Helm.ValuesObject.Raw)
	}
}

func (w *world) rollouts(t *testing.T) dynamic.ResourceInterface {
	t.Helper()
	return dynamic.NewForConfigOrDie(testenv.Current(t).Config).Resource(v1alpha1.RuntimeRolloutResource)
}

// createRollout creates a running RuntimeRollout of a name unique to the test.
func (w *world) createRollout(t *testing.T, res dynamic.ResourceInterface, name string) *v1alpha1.RuntimeRollout {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "RuntimeRollout",
		"metadata": map[string]any{"name": name + "-" + w.ns}, "spec": map[string]any{"runtime": testRuntime, "runtimeUID": testRuntimeUID},
	}}
	out, err := res.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create rollout %s: %v", name, err)
	}
	var ro v1alpha1.RuntimeRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &ro); err != nil {
		t.Fatal(err)
	}
	return &ro
}

// endRollout writes the rollout's status Succeeded, as the planner does before a later rollout
// starts a step.
func (w *world) endRollout(t *testing.T, res dynamic.ResourceInterface, ro *v1alpha1.RuntimeRollout) {
	t.Helper()
	u, err := res.Get(context.Background(), ro.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, string(v1alpha1.PhaseSucceeded), "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("end rollout %s: %v", ro.Name, err)
	}
}
