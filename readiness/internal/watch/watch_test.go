package watch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/readiness/internal/fences"
	"github.com/aicr-run/aicr-operator/readiness/internal/removal"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

func fencesOf(app *argoapp.Application) []v1alpha1.Fence {
	return fences.Evaluate(app, fences.Plan{Digest: "sha256:plan", Want: app.DeepCopy()}).Fences
}

// waitTimeout bounds every wait for the watcher to react.
const waitTimeout = 10 * time.Second

// waitFor waits until cond holds of what rec kept, failing the test after waitTimeout.
func waitFor(t *testing.T, rec *bustest.Recorder, what string, cond func([]bustest.Sent) bool) []bustest.Sent {
	t.Helper()
	return rec.WaitFor(t, waitTimeout, what, cond)
}

func verdicts(s []bustest.Sent) []*bus.ReleaseVerdict { return bustest.Of[*bus.ReleaseVerdict](s) }

func drifts(s []bustest.Sent) []*bus.DriftReport { return bustest.Of[*bus.DriftReport](s) }

var testSettings = appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "registry.example.com/aicr"}

// testPlan is a one-release plan stored as its ConfigMap.
func testPlan(t testing.TB) (*plan.Plan, *corev1.ConfigMap) {
	t.Helper()
	return planOf(t, bundleYAML)
}

// planOf is the plan of a bundle document and its ConfigMap in the operator namespace.
func planOf(t testing.TB, bundleDoc string) (*plan.Plan, *corev1.ConfigMap) {
	t.Helper()
	b, err := plan.ParseBundle([]byte(bundleDoc))
	if err != nil {
		t.Fatalf("parse bundle: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	cm, err := p.ConfigMap("aicr-system")
	if err != nil {
		t.Fatal(err)
	}
	return p, cm
}

// answered records the refresh handshake of the step app's annotations name as done: the
// applier asked for it (refresh-for) and Argo CD removed the request.
func answered(app *argoapp.Application) {
	app.Annotations[v1alpha1.AnnotationRefreshFor] = v1alpha1.AnnotatedStepToken(app.Annotations)
}

// written is the Application the applier writes for step stepID, with the status Argo CD
// writes once the sync of it succeeded (and its refresh request answered).
func written(t testing.TB, p *plan.Plan, stepID string) *argoapp.Application {
	t.Helper()
	r, ok := p.Release("gpu-operator")
	if !ok {
		t.Fatal("release gpu-operator missing from the test plan")
	}
	app, err := appspec.Build(testSettings, appspec.Input{Runtime: "cluster", RuntimeUID: "rt-uid", PlanDigest: p.Digest(), Release: r, StepID: stepID, StepStarted: time.Unix(1_800_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	app.UID = types.UID("app-uid-1")
	app.ResourceVersion = "1"
	app.Annotations[v1alpha1.AnnotationStepWrite] = v1alpha1.StepWriteChanged
	answered(app)
	finished := metav1.NewTime(time.Unix(1_800_000_060, 0))
	app.Status = argoapp.ApplicationStatus{
		Sync: argoapp.SyncStatus{Status: argoapp.SyncStatusCodeSynced, Revision: app.Spec.Source.TargetRevision,
			ComparedTo: argoapp.ComparedTo{Source: *app.Spec.Source.DeepCopy(), Destination: app.Spec.Destination, IgnoreDifferences: appspec.IgnoreDifferences()}},
		Health: argoapp.AppHealthStatus{Status: "Healthy", LastTransitionTime: &finished},
		OperationState: &argoapp.OperationState{
			Phase: argoapp.OperationSucceeded, StartedAt: finished, FinishedAt: &finished,
			SyncResult: &argoapp.SyncOperationResult{Revision: app.Spec.Source.TargetRevision, Source: *app.Spec.Source.DeepCopy()},
		},
	}
	return app
}

const bundleYAML = `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: test, version: 1.0.0}
components:
- name: gpu-operator
  namespace: gpu-operator
  chart: {path: charts/gpu-operator, digest: "sha256:db3440cd1cf81965a768c454a0dd5323fff8a29d663559ceee99e219f32f11a4"}
  values: {replicas: 2}
`

// fakeApps is an in-memory Application API of namespace argocd: the watcher lists and watches
// it, the tests change it as Argo CD or a person would.
type fakeApps struct {
	*gentype.FakeClientWithList[*argoapp.Application, *argoapp.ApplicationList]
	fake *clienttesting.Fake
}

// gets counts the reads of one Application (not lists or watches).
func (f *fakeApps) gets() int {
	n := 0
	for _, a := range f.fake.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func newFakeApps(t *testing.T, objs ...runtime.Object) *fakeApps {
	t.Helper()
	tracker := clienttesting.NewObjectTracker(argoapp.Scheme, argoapp.Codecs.UniversalDecoder())
	for _, o := range objs {
		if err := tracker.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	fake := &clienttesting.Fake{}
	fake.AddReactor("*", "*", clienttesting.ObjectReaction(tracker))
	fake.AddWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace())
		return true, w, err
	})
	return &fakeApps{gentype.NewFakeClientWithList(fake, "argocd", argoapp.SchemeGroupVersion.WithResource(argoapp.ResourceApplications),
		argoapp.SchemeGroupVersion.WithKind("Application"),
		func() *argoapp.Application { return &argoapp.Application{} },
		func() *argoapp.ApplicationList { return &argoapp.ApplicationList{} },
		func(dst, src *argoapp.ApplicationList) { dst.ListMeta = src.ListMeta },
		func(l *argoapp.ApplicationList) []*argoapp.Application {
			out := make([]*argoapp.Application, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out
		},
		func(l *argoapp.ApplicationList, items []*argoapp.Application) {
			l.Items = make([]argoapp.Application, len(items))
			for i, a := range items {
				l.Items[i] = *a
			}
		}), fake}
}

// ListWatch implements ListWatcher.
func (f *fakeApps) ListWatch(labelSelector string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = labelSelector
			return f.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = labelSelector
			return f.Watch(ctx, opts)
		},
	}
}

// fakeRollouts serves RuntimeRollouts by name and counts the reads.
type fakeRollouts struct {
	mu    sync.Mutex
	by    map[string]*v1alpha1.RuntimeRollout
	reads int
}

func (f *fakeRollouts) Get(_ context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if r, ok := f.by[name]; ok {
		return r.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(v1alpha1.RuntimeRolloutResource.GroupResource(), name)
}

// removing is a rollout whose Remove step of release started after the test Applications
// were written (written: step started at 1_800_000_000).
func removing(name, release string, state v1alpha1.StepState) *v1alpha1.RuntimeRollout {
	at := metav1.NewTime(time.Unix(1_800_000_100, 0))
	return &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1alpha1.RuntimeRolloutStatus{
		Phase: v1alpha1.PhaseProgressing,
		Steps: []v1alpha1.Step{{Index: 1, Release: release, Action: v1alpha1.ActionRemove, State: state, StartedAt: &at}},
	}}
}

func startWatcher(t *testing.T, objs ...runtime.Object) (*fakeApps, *bustest.Recorder, context.CancelFunc) {
	t.Helper()
	return startWatcherWith(t, &fakeRollouts{}, objs...)
}

func startWatcherWith(t *testing.T, rollouts *fakeRollouts, objs ...runtime.Object) (*fakeApps, *bustest.Recorder, context.CancelFunc) {
	t.Helper()
	_, cm := testPlan(t)
	apps := newFakeApps(t, objs...)
	kube := k8sfake.NewSimpleClientset(cm)
	rec := &bustest.Recorder{Dedupe: true}
	w := &Watcher{Apps: apps, Settings: testSettings, Publisher: rec,
		Plans:    plan.NewCache(plan.GetLoader(kube.CoreV1().ConfigMaps("aicr-system")), 0),
		Removals: &removal.Checker{Rollouts: rollouts}}
	return apps, rec, runWatcher(t, w)
}

// runWatcher runs w until the returned cancel is called or the test ends, then checks that it
// stopped cleanly.
func runWatcher(t *testing.T, w *Watcher) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("watcher: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("watcher did not stop within %s", waitTimeout)
		}
	})
	return cancel
}

func TestWatcherPublishesAVerdictOnlyWhenItChanges(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	argo, rec, _ := startWatcher(t, app)
	s := waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	v := verdicts(s)[0]
	if !v.Ready || v.StepID != "r-1/1" || v.Runtime != "cluster" || v.Release != "gpu-operator" || v.PlanDigest != p.Digest() {
		t.Fatalf("first verdict = %+v", v)
	}
	if s[0].Subject != bus.VerdictSubject("cluster", "gpu-operator") {
		t.Errorf("subject = %s", s[0].Subject)
	}

	// A reconcile that moves only reconciledAt changes nothing a verdict says.
	ctx := context.Background()
	now := metav1.NewTime(time.Unix(1_800_000_200, 0))
	app.Status.ReconciledAt = &now
	app.ResourceVersion = "2"
	if _, err := argo.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next step writes new values: the status now describes an earlier spec.
	app.Annotations[v1alpha1.AnnotationStep] = "r-2/1"
	app.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"replicas":3}`)
	app.ResourceVersion = "3"
	if _, err := argo.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitFor(t, rec, "the verdict of step r-2/1", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return len(vs) >= 2 && vs[len(vs)-1].StepID == "r-2/1"
	})
	vs := verdicts(s)
	if len(vs) != 2 {
		t.Fatalf("published %d verdicts, want 2 (the reconcile changed nothing):\n%s", len(vs), bustest.Describe(s))
	}
	if vs[1].Ready {
		t.Errorf("a verdict on stale status says ready: %+v", vs[1])
	}
}

func TestWatcherRestartRepublishesTheSameIDs(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	_, first, cancel := startWatcher(t, app.DeepCopy())
	s1 := waitFor(t, first, "a verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	cancel()
	_, second, _ := startWatcher(t, app.DeepCopy())
	s2 := waitFor(t, second, "a verdict after restart", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	if s1[0].ID != s2[0].ID {
		t.Errorf("restart changed the message ID: %s then %s", s1[0].ID, s2[0].ID)
	}
}

func TestWatcherReportsDriftAndItsEnd(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	argo, rec, _ := startWatcher(t, app)
	waitFor(t, rec, "a verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	if d := drifts(rec.Sent()); len(d) != 0 {
		t.Fatalf("drift reported for the Application as written: %+v", d[0])
	}
	ctx := context.Background()
	edited := app.DeepCopy()
	edited.Spec.Destination.Namespace = "elsewhere"
	no := false
	edited.Spec.SyncPolicy.Automated.Enabled = &no
	edited.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer}
	if _, err := argo.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "a drift report", func(s []bustest.Sent) bool { return len(drifts(s)) == 1 })
	got := drifts(s)[0]
	want := []string{bus.DriftAutoSyncDisabled, bus.DriftDestination, bus.DriftFinalizerAdded}
	if diff := cmp.Diff(want, got.Kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if _, err := argo.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitFor(t, rec, "drift cleared", func(s []bustest.Sent) bool { return len(drifts(s)) == 2 })
	if k := drifts(s)[1].Kinds; k == nil || len(k) != 0 {
		t.Errorf("clearing report kinds = %#v, want empty", k)
	}
}

func TestWatcherReportsDeletionOutsideARemoveStep(t *testing.T) {
	p, _ := testPlan(t)
	hand := written(t, p, "r-1/1")
	removed := written(t, p, "r-1/1")
	removed.Name, removed.UID = "removed", "app-uid-2"
	removed.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-3"
	// A hand-set marker naming a rollout that removes another release hides nothing.
	forged := written(t, p, "r-1/1")
	forged.Name, forged.UID = "forged", "app-uid-3"
	forged.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-3"
	rollouts := &fakeRollouts{by: map[string]*v1alpha1.RuntimeRollout{"r-3": removing("r-3", "removed", v1alpha1.StepInProgress)}}
	argo, rec, _ := startWatcherWith(t, rollouts, hand, removed, forged)
	waitFor(t, rec, "the verdicts of gpu-operator and forged", func(s []bustest.Sent) bool { return len(verdicts(s)) == 2 })
	ctx := context.Background()
	for _, n := range []string{"removed", "forged", "gpu-operator"} {
		if err := argo.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := waitFor(t, rec, "two Deleted reports", func(s []bustest.Sent) bool {
		n := 0
		for _, d := range drifts(s) {
			if slices.Contains(d.Kinds, bus.DriftDeleted) {
				n++
			}
		}
		return n >= 2
	})
	var deleted []string
	for _, d := range drifts(s) {
		if slices.Contains(d.Kinds, bus.DriftDeleted) {
			deleted = append(deleted, d.Release)
		}
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"forged", "gpu-operator"}) {
		t.Errorf("Deleted reported for %v, want forged and gpu-operator (not removed, under its Remove step):\n%s", deleted, bustest.Describe(s))
	}
	for _, v := range verdicts(s) {
		if v.Release == "removed" {
			t.Errorf("verdict published for an Application under a Remove step: %+v", v)
		}
	}
}

func TestTransformKeepsWhatTheJudgesRead(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	app.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply},
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: "argocd-application-controller", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate},
	}
	before := app.DeepCopy()
	obj, err := Transform(app)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*argoapp.Application)
	if &got.Status.Sync.ComparedTo.IgnoreDifferences[0] != &got.Spec.IgnoreDifferences[0] {
		t.Errorf("transform kept a copy of the spec's ignoreDifferences in comparedTo")
	}
	if got.Status.Sync.ComparedTo.Source.Helm.ValuesObject != got.Spec.Source.Helm.ValuesObject ||
		got.Status.OperationState.SyncResult.Source.Helm.ValuesObject != got.Spec.Source.Helm.ValuesObject {
		t.Errorf("transform kept copies of the spec's values in comparedTo and syncResult")
	}
	var managers []string
	for _, e := range got.ManagedFields {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
	}
	if diff := cmp.Diff([]string{"aicr-operator/Apply", "kubectl-patch/Update"}, managers); diff != "" {
		t.Errorf("managedFields kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fencesOf(before), fencesOf(got)); diff != "" {
		t.Errorf("the transform changed the verdict (-before +after):\n%s", diff)
	}
}

// A hand edit of the values that Argo CD synced and found healthy is not the plan rolled out:
// the verdict stays not ready, judged against what the plan renders, and the drift report that
// names the edit is published before it. Undoing the edit makes it ready again.
func TestWatcherJudgesAgainstThePlanNotAHandEdit(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	argo, rec, _ := startWatcher(t, app)
	waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 && verdicts(s)[0].Ready })

	// The edit, compared, synced and healthy: every status field describes it.
	edited := app.DeepCopy()
	edited.ResourceVersion = "2"
	edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"replicas":5}`)}
	edited.Status.Sync.ComparedTo.Source = *edited.Spec.Source.DeepCopy()
	edited.Status.OperationState.SyncResult.Source = *edited.Spec.Source.DeepCopy()
	if _, err := argo.Update(context.Background(), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "a not-ready verdict on the edit", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return len(vs) == 2 && !vs[1].Ready
	})
	v := verdicts(s)[1]
	f, _ := fenceNamed(v.Fences, v1alpha1.FenceComparedToSpec)
	if f.State != v1alpha1.FenceOpen || !strings.Contains(f.Message, "helm.valuesObject (edited by hand") {
		t.Errorf("ComparedToSpec = %+v, want Open naming the values edit", f)
	}
	if v.Observed.ResourceVersion != "2" {
		t.Errorf("verdict observed resourceVersion %q, want 2", v.Observed.ResourceVersion)
	}
	var driftAt, verdictAt = -1, -1
	for i, m := range s {
		switch x := m.Msg.(type) {
		case *bus.DriftReport:
			if driftAt < 0 && slices.Contains(x.Kinds, bus.DriftValues) {
				driftAt = i
			}
		case *bus.ReleaseVerdict:
			if !x.Ready {
				verdictAt = i
			}
		}
	}
	if driftAt < 0 || driftAt > verdictAt {
		t.Errorf("the Values drift report (at %d) was not published before the not-ready verdict (at %d):\n%s", driftAt, verdictAt, bustest.Describe(s))
	}

	// Undone by hand, with nothing for Argo CD to sync: the same status, times and verdict as
	// before the edit, at a later resourceVersion.
	undone := app.DeepCopy()
	undone.ResourceVersion = "3"
	if _, err := argo.Update(context.Background(), undone, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "a ready verdict once the edit is undone", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return len(vs) == 3 && vs[2].Ready
	})
}

// An Application naming a plan that is not stored is never judged ready: readiness cannot know
// what it must be.
func TestWatcherDoesNotJudgeWithoutThePlan(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	app.Annotations[v1alpha1.AnnotationPlanDigest] = "sha256:0000000000000000000000000000000000000000000000000000000000000009"
	_, rec, _ := startWatcher(t, app)
	s := waitFor(t, rec, "a verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	v := verdicts(s)[0]
	f, _ := fenceNamed(v.Fences, v1alpha1.FenceComparedToSpec)
	if v.Ready || f.State != v1alpha1.FenceOpen || !strings.Contains(f.Message, "cannot be read") {
		t.Errorf("verdict ready=%v, ComparedToSpec %+v: want not ready, naming the missing plan", v.Ready, f)
	}
}

func fenceNamed(fs []v1alpha1.Fence, name string) (v1alpha1.Fence, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return v1alpha1.Fence{}, false
}

// A step written again with the same spec is news for the rollout that waits on it, though the
// Application stays ready: a rollout of the same name created again (a move undone and redone)
// writes the same step ID with a new start, or, when both steps began in the same second, the
// same start and only another rollout UID. The verdict is published again under an ID JetStream
// does not drop, carrying the new UID, by a running watcher and by one restarted after the
// write alike. (Without it, e2e/lifecycle's rollout waited forever for a verdict readiness had
// already published for its namesake.)
func TestWatcherRepublishesAReadyVerdictForAStepWrittenAgain(t *testing.T) {
	tests := map[string]struct {
		// first and again are the step's annotations before and after it is written again.
		first, again map[string]string
	}{
		"the same step started again": {
			again: map[string]string{v1alpha1.AnnotationStepStarted: time.Unix(1_800_000_001, 0).UTC().Format(time.RFC3339)},
		},
		"a namesake rollout's step, started in the same second": {
			first: map[string]string{v1alpha1.AnnotationStepRolloutUID: "rollout-uid-a"},
			again: map[string]string{v1alpha1.AnnotationStepRolloutUID: "rollout-uid-b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, _ := testPlan(t)
			app := written(t, p, "r-1/1")
			maps.Copy(app.Annotations, tc.first)
			answered(app)
			argo, rec, _ := startWatcher(t, app.DeepCopy())
			waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
			again := app.DeepCopy()
			again.ResourceVersion = "2"
			maps.Copy(again.Annotations, tc.again)
			answered(again)
			if _, err := argo.Update(context.Background(), again, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := waitFor(t, rec, "the verdict of the step written again", func(s []bustest.Sent) bool { return len(verdicts(s)) == 2 })
			vs := verdicts(s)
			if !vs[0].Ready || !vs[1].Ready || vs[1].StepID != "r-1/1" {
				t.Fatalf("verdicts %+v then %+v, want step r-1/1 ready twice", vs[0], vs[1])
			}
			if want := again.Annotations[v1alpha1.AnnotationStepRolloutUID]; vs[0].RolloutUID != app.Annotations[v1alpha1.AnnotationStepRolloutUID] || vs[1].RolloutUID != want {
				t.Fatalf("verdicts for rollouts %q then %q, want %q then %q", vs[0].RolloutUID, vs[1].RolloutUID, app.Annotations[v1alpha1.AnnotationStepRolloutUID], want)
			}
			if s[0].ID == s[1].ID {
				t.Fatalf("both verdicts have message ID %s: JetStream would drop the second", s[0].ID)
			}
			_, restarted, _ := startWatcher(t, again)
			r := waitFor(t, restarted, "a verdict after restart", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
			if r[0].ID == s[0].ID {
				t.Fatalf("a restarted watcher publishes the step written again under the first write's ID %s: JetStream would drop it", s[0].ID)
			}
		})
	}
}

// A verdict that returns to an earlier one after a change no hashed time marks (an error
// condition that comes and goes, as Argo CD's controller reports right after it starts) is
// published again under a new ID: JetStream would drop a repeat of the first.
func TestWatcherRepublishesAVerdictThatReturns(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	argo, rec, _ := startWatcher(t, app)
	waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	blip := app.DeepCopy()
	blip.ResourceVersion = "2"
	blip.Status.Conditions = []argoapp.ApplicationCondition{{Type: argoapp.ApplicationConditionInvalidSpecError, Message: "Application referencing project aicr which does not exist"}}
	if _, err := argo.Update(context.Background(), blip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "the failed verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 2 })
	back := app.DeepCopy()
	back.ResourceVersion = "3"
	if _, err := argo.Update(context.Background(), back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "the ready verdict again", func(s []bustest.Sent) bool { return len(verdicts(s)) == 3 })
	vs := verdicts(s)
	if !vs[0].Ready || vs[1].Ready || !vs[1].Failed || !vs[2].Ready {
		t.Errorf("verdicts ready %v/%v/%v, want ready, failed, ready", vs[0].Ready, vs[1].Ready, vs[2].Ready)
	}
}

// "Operator markers are never taken on trust": a delete-rollout marker silences an Application's
// verdicts and drift only while the rollout it names removes the release. Set by hand on a ready
// release it is Other drift naming the annotation, the verdicts keep flowing, and once it is
// removed the drift clears; a marker backed by a Remove step silences both (one rollout read).
func TestWatcherChecksTheDeleteRolloutMarker(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	rollouts := &fakeRollouts{by: map[string]*v1alpha1.RuntimeRollout{
		"r-other": removing("r-other", "nfd", v1alpha1.StepInProgress),
		"r-old":   removing("r-old", "gpu-operator", v1alpha1.StepSucceeded),
		"r-rm":    removing("r-rm", "gpu-operator", v1alpha1.StepInProgress),
	}}
	// r-old removed gpu-operator before the Application was written again.
	before := metav1.NewTime(time.Unix(1_799_999_000, 0))
	rollouts.by["r-old"].Status.Steps[0].StartedAt = &before
	argo, rec, _ := startWatcherWith(t, rollouts, app)
	waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	ctx := context.Background()
	rv := 1
	update := func(change func(a *argoapp.Application)) {
		t.Helper()
		rv++
		next := app.DeepCopy()
		change(next)
		next.ResourceVersion = fmt.Sprint(rv)
		if _, err := argo.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	markerField := ".metadata.annotations." + v1alpha1.AnnotationDeleteRollout
	for i, marker := range []string{"by-hand", "r-other", "r-old"} {
		t.Run(marker, func(t *testing.T) {
			update(func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationDeleteRollout] = marker
				a.Status.Health.Status = "Degraded" // a verdict that changes: it must still be published
			})
			s := waitFor(t, rec, "the marker reported as drift", func(s []bustest.Sent) bool { return len(drifts(s)) == 2*i+1 })
			d := drifts(s)[2*i]
			if !slices.Equal(d.Kinds, []string{bus.DriftOther}) || !slices.Equal(d.Fields, []string{markerField}) {
				t.Errorf("drift report %+v, want Other on %s", d, markerField)
			}
			waitFor(t, rec, "the not-ready verdict", func(s []bustest.Sent) bool {
				vs := verdicts(s)
				return !vs[len(vs)-1].Ready
			})
			update(func(a *argoapp.Application) {}) // the marker repaired, healthy again
			s = waitFor(t, rec, "the drift cleared and a ready verdict", func(s []bustest.Sent) bool {
				vs := verdicts(s)
				return len(drifts(s)) == 2*i+2 && vs[len(vs)-1].Ready
			})
			if k := drifts(s)[2*i+1].Kinds; len(k) != 0 {
				t.Errorf("clearing report kinds = %v", k)
			}
		})
	}
	// Under its Remove step: neither a verdict nor drift, whatever else changes.
	published := len(rec.Sent())
	reads := func() int { rollouts.mu.Lock(); defer rollouts.mu.Unlock(); return rollouts.reads }
	readsBefore := reads()
	update(func(a *argoapp.Application) {
		a.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-rm"
		a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer}
	})
	update(func(a *argoapp.Application) {
		a.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-rm"
		a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer}
		a.Status.Health.Status = "Progressing"
	})
	// A last, unmarked Application as a fence: once its verdict is out, the marked updates were handled.
	other := written(t, p, "r-1/1")
	other.Name, other.UID = "fence", "app-uid-9"
	if _, err := argo.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "the verdict of another Application", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return vs[len(vs)-1].Release == "fence"
	})
	for _, m := range rec.Sent()[published:] {
		if v, ok := m.Msg.(*bus.ReleaseVerdict); ok && v.Release == "gpu-operator" {
			t.Errorf("verdict published under a Remove step: %+v", v)
		}
		if d, ok := m.Msg.(*bus.DriftReport); ok && d.Release == "gpu-operator" {
			t.Errorf("drift reported under a Remove step: %+v", d)
		}
	}
	if n := reads() - readsBefore; n != 1 {
		t.Errorf("%d rollout reads for two updates under one Remove step, want 1", n)
	}
}

// TestWatcherReadsEachPlanOnce: with more plans named than the plan cache holds, each plan is
// read once. At start the first list's Applications are judged grouped by the plan they name,
// whatever order the list came in (the fake lists by name, and the names alternate plans; a real
// streaming list comes in map order). After, an Application that still names the same plan is
// judged against the release kept from its last judgement.
func TestWatcherReadsEachPlanOnce(t *testing.T) {
	const plans, perPlan = 3, 4
	var objs []runtime.Object
	var cms []runtime.Object
	for k := range plans {
		var components []string
		for i := range perPlan {
			// Named so that name order alternates plans: c00 (plan 0), c01 (plan 1), ...
			components = append(components, fmt.Sprintf("c%d%d: {plan: %d}", i, k, k))
		}
		p, cm := storedPlan(t, fmt.Sprintf("1.0.%d", k), components...)
		cms = append(cms, cm)
		for i := range p.Releases {
			objs = append(objs, writtenFrom(t, p, i, fmt.Sprintf("r-%d/%d", k, i+1), time.Unix(1_800_000_000, 0)))
		}
	}
	kube := k8sfake.NewSimpleClientset(cms...)
	rec := &bustest.Recorder{Dedupe: true}
	w := &Watcher{Apps: newFakeApps(t, objs...), Settings: testSettings, Publisher: rec,
		Plans: plan.NewCache(plan.GetLoader(kube.CoreV1().ConfigMaps("aicr-system")), 1)}
	runWatcher(t, w)
	ctx := context.Background()
	waitFor(t, rec, "a verdict on every Application", func(s []bustest.Sent) bool { return len(verdicts(s)) == plans*perPlan })
	readOnce(t, kube, plans, "at start")

	// Argo CD refreshes every Application and writes its status, in no order of plans: here
	// each now reports a sync running, a new verdict each, judged without reading a plan again.
	slices.SortFunc(objs, func(a, b runtime.Object) int {
		return strings.Compare(a.(*argoapp.Application).Name, b.(*argoapp.Application).Name) // plans alternate
	})
	for _, o := range objs {
		app := o.(*argoapp.Application).DeepCopy()
		app.Status.Health.Status = "Progressing"
		if _, err := w.Apps.(*fakeApps).Update(ctx, app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := waitFor(t, rec, "a second verdict on every Application", func(s []bustest.Sent) bool { return len(verdicts(s)) == 2*plans*perPlan })
	for _, v := range verdicts(s)[plans*perPlan:] {
		if v.Ready || v.PlanDigest == "" {
			t.Errorf("verdict after the refresh %+v, want not ready, judged against its plan", v)
		}
	}
	readOnce(t, kube, plans, "after every Application's status changed")

	// The next rollout writes c00 from a plan of its own: that plan is read.
	next, cm := storedPlan(t, "2.0.0", "c00: {plan: 9}")
	if err := kube.Tracker().Add(cm); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apps.(*fakeApps).Update(ctx, writtenFrom(t, next, 0, "r-9/1", time.Unix(1_800_000_300, 0)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "a verdict on c00 against the next plan", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return len(vs) > 2*plans*perPlan && vs[len(vs)-1].PlanDigest == next.Digest()
	})
	readOnce(t, kube, plans+1, "after c00 moved to the next plan")
}

// writtenFrom is the Application the applier writes for release i of p in step stepID (no
// status), its UID its name.
func writtenFrom(t *testing.T, p *plan.Plan, i int, stepID string, started time.Time) *argoapp.Application {
	t.Helper()
	app, err := appspec.Build(testSettings, appspec.Input{Runtime: "cluster", RuntimeUID: "rt-uid", PlanDigest: p.Digest(),
		Release: &p.Releases[i], StepID: stepID, StepStarted: started})
	if err != nil {
		t.Fatal(err)
	}
	app.UID = types.UID(app.Name)
	return app
}

// storedPlan is the plan of a bundle of the given components ("name: values", one chart each)
// and its ConfigMap.
func storedPlan(t *testing.T, version string, components ...string) (*plan.Plan, *corev1.ConfigMap) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: test, version: %s}\ncomponents:\n", version)
	for _, c := range components {
		name, values, _ := strings.Cut(c, ": ")
		fmt.Fprintf(&b, "- name: %s\n  namespace: ns\n  chart: {path: charts/c, digest: \"sha256:db3440cd1cf81965a768c454a0dd5323fff8a29d663559ceee99e219f32f11a4\"}\n  values: %s\n", name, values)
	}
	return planOf(t, b.String())
}

// readOnce checks that each of the plans was read exactly once from the API server.
func readOnce(t *testing.T, kube *k8sfake.Clientset, plans int, when string) {
	t.Helper()
	reads := map[string]int{}
	for _, a := range kube.Actions() {
		if g, ok := a.(clienttesting.GetAction); ok && a.GetResource().Resource == "configmaps" {
			reads[g.GetName()]++
		}
	}
	if len(reads) != plans {
		t.Fatalf("%s: read %d plans, want %d: %v", when, len(reads), plans, reads)
	}
	for name, n := range reads {
		if n != 1 {
			t.Errorf("%s: plan %s read %d times, want once (reads %v)", when, name, n, reads)
		}
	}
}

// With NoDriftReports (--drift-reports=false) an edit is judged (its verdict says so) but no
// drift report goes out: the planner finds it from state.
func TestWatcherWithoutDriftReportsPublishesVerdictsOnly(t *testing.T) {
	p, cm := testPlan(t)
	app := written(t, p, "r-1/1")
	apps := newFakeApps(t, app)
	rec := &bustest.Recorder{Dedupe: true}
	runWatcher(t, &Watcher{Apps: apps, Settings: testSettings, Publisher: rec, NoDriftReports: true,
		Plans: plan.NewCache(plan.GetLoader(k8sfake.NewSimpleClientset(cm).CoreV1().ConfigMaps("aicr-system")), 0)})
	waitFor(t, rec, "a verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	edited := app.DeepCopy()
	edited.Spec.Destination.Namespace = "elsewhere"
	if _, err := apps.Update(context.Background(), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "the verdict on the edit", func(s []bustest.Sent) bool { return len(verdicts(s)) == 2 })
	if f, _ := fenceNamed(verdicts(s)[1].Fences, v1alpha1.FenceComparedToSpec); !strings.Contains(f.Message, "destination") {
		t.Errorf("the verdict after the edit says %q, want the edited destination", f.Message)
	}
	if d := drifts(rec.Sent()); len(d) != 0 {
		t.Errorf("drift reports published with NoDriftReports: %+v", d)
	}
}
