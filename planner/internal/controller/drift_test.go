package controller

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

var driftSettings = appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "registry.example.com/aicr"}

// fakeApps is a ListerWatcher of Applications a test changes through its watcher.
type fakeApps struct {
	mu    sync.Mutex
	items []argoapp.Application
	w     *watch.FakeWatcher
}

func (f *fakeApps) lw() cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return &argoapp.ApplicationList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: append([]argoapp.Application(nil), f.items...)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return f.w, nil },
	}
}

// driftHarness is a controller with the drift loop on a fake informer, the runtime at an
// active plan, and no rollout.
type driftHarness struct {
	c     *Controller
	pub   *bustest.Recorder
	rec   *record.FakeRecorder
	apps  *fakeApps
	plan  *plan.Plan
	rt    *v1alpha1.ClusterRuntime
	store *memStore
}

// setRuntime changes the runtime the store serves, under the store's lock: the drift worker
// reads it at each check its informer's events queue.
func (h *driftHarness) setRuntime(change func(*v1alpha1.ClusterRuntime)) {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	change(h.rt)
}

// editValues stands for a person's edit of the first release's Application: the values set to
// values at resourceVersion 11, once the informer holds it.
func (h *driftHarness) editValues(t *testing.T, values string) (release string, edited *argoapp.Application) {
	t.Helper()
	release = h.plan.Releases[0].Name
	edited = h.written(t, release)
	edited.ResourceVersion = "11"
	edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(values)}
	h.change(t, edited)
	return release, edited
}

// basis returns the basis of the i-th command published (nil when it has none).
func (h *driftHarness) basis(t *testing.T, i int) *bus.Basis {
	t.Helper()
	sent := h.pub.Sent()
	cmd, ok := sent[i].Msg.(*bus.ApplyCommand)
	if !ok {
		t.Fatalf("command %d is a %T, want an ApplyCommand", i, sent[i].Msg)
	}
	return cmd.Basis
}

func newDriftHarness(t *testing.T) *driftHarness {
	t.Helper()
	return newDriftHarnessWith(t, driftOptions{})
}

// driftOptions change the harness's defaults: two releases, the real clock, a resync an hour
// away, the memStore read directly and the runtime's name the only one known.
type driftOptions struct {
	releases int
	clock    clock.WithTicker
	resync   time.Duration
	store    func(*memStore) Store
	names    []string
}

func newDriftHarnessWith(t *testing.T, o driftOptions) *driftHarness {
	t.Helper()
	if o.releases == 0 {
		o.releases = 2
	}
	if o.resync == 0 {
		o.resync = time.Hour
	}
	p, err := plan.Resolve(chainBundle(o.releases), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName, UID: "rt-uid"}}
	rt.Status.ActivePlan, rt.Status.EnginePolicy = p.Digest(), v1alpha1.EnginePolicyArgoCDV2
	h := &driftHarness{pub: &bustest.Recorder{}, rec: record.NewFakeRecorder(100), apps: &fakeApps{w: watch.NewFake()}, plan: p, rt: rt,
		store: &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{}}}
	for _, r := range p.Releases {
		h.apps.items = append(h.apps.items, *h.written(t, r.Name))
	}
	var store Store = h.store
	if o.store != nil {
		store = o.store(h.store)
	}
	h.c = New(Config{Name: "planner", Namespace: "aicr-system", EngineNamespace: driftSettings.EngineNamespace, Clock: o.clock,
		Applications: h.apps.lw(), Settings: driftSettings, Recorder: h.rec, DriftResync: o.resync}, store, h.pub)
	if o.names != nil {
		h.c.names = func() []string { return o.names }
	}
	if err := h.c.plans.Add(p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); h.c.queue.ShutDown(); wg.Wait() })
	if err := h.c.runDrift(ctx, &wg); err != nil { // the informer, its handlers, the worker and the resync
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), h.c.drift.informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	return h
}

// written is release's Application as the active plan's step wrote it.
func (h *driftHarness) written(t *testing.T, release string) *argoapp.Application {
	t.Helper()
	r, _ := h.plan.Release(release)
	app, err := appspec.Build(driftSettings, appspec.Input{Runtime: h.rt.Name, RuntimeUID: string(h.rt.UID), PlanDigest: h.plan.Digest(), Release: r,
		StepID: "r-1/1", StepStarted: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), StepRolloutUID: "r-uid"})
	if err != nil {
		t.Fatal(err)
	}
	app.ResourceVersion, app.UID = "10", types.UID("uid-"+release)
	return app
}

// change hands the informer a new version of the Application and waits until it holds it.
func (h *driftHarness) change(t *testing.T, app *argoapp.Application) {
	t.Helper()
	h.apps.w.Modify(app.DeepCopy()) // the informer owns what it is handed
	servicetest.Eventually(t, 5*time.Second, "the informer to hold "+app.Name+" at "+app.ResourceVersion, func() (bool, string) {
		obj, ok, _ := h.c.drift.informer.GetStore().GetByKey(app.Namespace + "/" + app.Name)
		return ok && obj.(*argoapp.Application).ResourceVersion == app.ResourceVersion, ""
	})
}

// A drift report delivered twice, or a check of the same state run again, publishes one
// repair: the decision is the state's, and its message ID names the state. Once the
// Application is as written again, nothing more is published.
func TestDriftDecidedFromStateOnceWhateverTheReports(t *testing.T) {
	h := newDriftHarness(t)
	ctx := context.Background()
	release, edited := h.editValues(t, `{"image":{"tag":"hand"},"replicas":2}`)

	report := reportMessage(t, bus.TypeDriftReport, &bus.DriftReport{Runtime: h.rt.Name, Release: release, Kinds: []string{bus.DriftValues}, ResourceVersion: "11"})
	for range 2 { // the same report delivered twice: each queues a check of the release
		if err := h.c.handleDrift(ctx, report); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // the check, and a resync of every release, twice
		for _, k := range []driftKey{{runtime: h.rt.Name, release: release}, {runtime: h.rt.Name}} {
			if err := h.c.reconcileDrift(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := h.pub.IDs()
	if len(got) != 1 || !strings.HasPrefix(got[0], "repair/") || !strings.HasSuffix(got[0], "/11/"+release) {
		t.Fatalf("published %v, want one repair of %s tagged with resourceVersion 11", got, release)
	}
	// Its ordering token is the Application it was decided from (the applier refuses it on any
	// other).
	if b, want := h.basis(t, 0), (bus.Basis{UID: string(edited.UID), ResourceVersion: "11", Step: "r-1/1@r-uid"}); b == nil || *b != want {
		t.Errorf("repair basis %+v, want %+v", b, want)
	}

	// A report that never came changes nothing either: the undo is seen in the state.
	h.change(t, func() *argoapp.Application { a := h.written(t, release); a.ResourceVersion = "12"; return a }())
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name}); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.IDs(); len(got) != 1 {
		t.Errorf("published %v after the edit was undone, want nothing more", got)
	}
}

// A deleted Application of a release the stack holds is written again, tagged with the
// deleted one's UID, by the check its deletion queued or by a check of every release.
func TestADeletedApplicationIsWrittenAgain(t *testing.T) {
	h := newDriftHarness(t)
	gone := h.written(t, h.plan.Releases[1].Name)
	h.apps.w.Delete(gone.DeepCopy())
	servicetest.Eventually(t, 5*time.Second, "the informer's store without the Application", func() (bool, string) {
		_, exists, err := h.c.drift.informer.GetStore().Get(gone)
		return err == nil && !exists, ""
	})
	for range 2 {
		if err := h.c.reconcileDrift(context.Background(), driftKey{runtime: h.rt.Name}); err != nil {
			t.Fatal(err)
		}
	}
	got := h.pub.IDs()
	if len(got) != 1 || !strings.HasSuffix(got[0], "/gone-"+string(gone.UID)+"/"+gone.Name) {
		t.Fatalf("published %v, want one rewrite of %s tagged with its UID", got, gone.Name)
	}
	if b := h.basis(t, 0); b == nil || *b != (bus.Basis{}) {
		t.Errorf("rewrite basis %+v, want the empty basis: decided from no Application", b)
	}
}

// A check that runs after the informer's store dropped a deleted Application but before its
// delete handler ran (the store is written first) tags the rewrite with the deleted one's UID
// too, from what the handlers last saw of it: the same command as after the handler, not a
// second one tagged with the process's start.
func TestADeletionCheckedBeforeItsHandlerIsTaggedWithItsUID(t *testing.T) {
	h := newDriftHarness(t)
	gone := h.written(t, h.plan.Releases[1].Name)
	if err := h.c.drift.informer.GetStore().Delete(gone.DeepCopy()); err != nil { // no handler runs
		t.Fatal(err)
	}
	if err := h.c.reconcileDrift(context.Background(), driftKey{runtime: h.rt.Name}); err != nil {
		t.Fatal(err)
	}
	got := h.pub.IDs()
	if len(got) != 1 || !strings.HasSuffix(got[0], "/gone-"+string(gone.UID)+"/"+gone.Name) {
		t.Fatalf("published %v, want one rewrite of %s tagged with its UID", got, gone.Name)
	}
}

// FieldOwnershipOverridden is recorded when the applier reports the repair written, never
// when it refuses it.
func TestFieldOwnershipOverriddenAfterTheWriteOnly(t *testing.T) {
	h := newDriftHarness(t)
	ctx := context.Background()
	release, edited := h.editValues(t, `{"image":{"tag":"hand"},"replicas":2}`)
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: release}); err != nil {
		t.Fatal(err)
	}
	cmds := h.pub.IDs()
	if len(cmds) != 1 {
		t.Fatalf("published %v, want one repair of the edited values", cmds)
	}
	if n := len(h.rec.Events); n != 0 {
		t.Fatalf("%d Events before the applier answered: %s", n, <-h.rec.Events)
	}
	answer := func(cmd, outcome string) {
		t.Helper()
		stepID := cmd[:strings.LastIndexByte(cmd, '/')]
		res := &bus.ApplyResult{CommandID: cmd, Runtime: h.rt.Name, Release: release, Step: bus.StepRef{ID: stepID}, Outcome: outcome, Reason: "TransitionBlocked"}
		if err := h.c.handleResult(ctx, reportMessage(t, bus.TypeApplyResult, res)); err != nil {
			t.Fatal(err)
		}
	}
	answer(cmds[0], bus.OutcomeBlocked)
	if e := <-h.rec.Events; !strings.Contains(e, "refused") || strings.Contains(e, v1alpha1.EventFieldOwnershipOverridden) {
		t.Errorf("Event %q on a refused repair, want only the refusal", e)
	}
	if n := len(h.rec.Events); n != 0 {
		t.Errorf("%d more Events after the refusal: %s", n, <-h.rec.Events)
	}
	// The cause of the refusal goes (a new version, still edited): a new repair, written.
	edited.ResourceVersion = "12"
	h.change(t, edited)
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: release}); err != nil {
		t.Fatal(err)
	}
	cmds = h.pub.IDs()
	if len(cmds) != 2 {
		t.Fatalf("published %v, want a second repair of the new version", cmds)
	}
	answer(cmds[1], bus.OutcomeWritten)
	if e := <-h.rec.Events; !strings.Contains(e, v1alpha1.EventFieldOwnershipOverridden) || !strings.Contains(e, release) {
		t.Errorf("first Event after the write %q, want FieldOwnershipOverridden naming %s", e, release)
	}
}

// A drift the repair's write did not undo (a field the write does not remove) is not forced
// back write after write: the next version, the same drift, waits for the resync. A repair the
// applier refused is tried again at the next check, under a new message ID.
func TestARepairIsNotRepeatedWriteAfterWrite(t *testing.T) {
	h := newDriftHarness(t)
	ctx := context.Background()
	release, edited := h.editValues(t, `{"image":{"tag":"v1"},"replicas":2,"added":true}`)
	check := func() []string {
		t.Helper()
		if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: release}); err != nil {
			t.Fatal(err)
		}
		return h.pub.IDs()
	}
	first := check()
	if len(first) != 1 {
		t.Fatalf("published %v, want one repair", first)
	}
	written := edited.DeepCopy() // the repair's write, which left the added key
	written.ResourceVersion = "12"
	h.change(t, written)
	if got := check(); len(got) != 1 {
		t.Errorf("published %v after the write left the same drift, want no second repair within the resync", got)
	}

	res := &bus.ApplyResult{CommandID: first[0], Runtime: h.rt.Name, Release: release, Step: bus.StepRef{ID: "repair/x"}, Outcome: bus.OutcomeFailed}
	if err := h.c.handleResult(ctx, reportMessage(t, bus.TypeApplyResult, res)); err != nil {
		t.Fatal(err)
	}
	if got := check(); len(got) != 2 || got[1] != "repair/"+strings.TrimPrefix(h.plan.Digest(), "sha256:")[:12]+"/12/"+release {
		t.Errorf("published %v after the applier refused, want a repair of version 12", got)
	}
}

// The same edit made again after its repair landed is new drift, forced back at the check
// its change queues, not at the next resync (the harness's is an hour away): a check saw the
// release as the plan says in between, so the second edit is no leftover of the first write.
func TestTheSameEditMadeAgainAfterItsRepairLandedIsForcedBackAtOnce(t *testing.T) {
	h := newDriftHarness(t)
	ctx := context.Background()
	release := h.plan.Releases[0].Name
	edit := func(rv string) {
		t.Helper()
		edited := h.written(t, release)
		edited.ResourceVersion = rv
		edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"image":{"tag":"hand"},"replicas":2}`)}
		h.change(t, edited)
	}
	check := func() []string {
		t.Helper()
		if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: release}); err != nil {
			t.Fatal(err)
		}
		return h.pub.IDs()
	}
	edit("11")
	if got := check(); len(got) != 1 {
		t.Fatalf("published %v, want one repair of the edit", got)
	}
	repaired := h.written(t, release) // the repair's write: the Application as the plan says
	repaired.ResourceVersion = "12"
	h.change(t, repaired)
	if got := check(); len(got) != 1 {
		t.Fatalf("published %v once the repair landed, want nothing more", got)
	}
	edit("13")
	got := check()
	if len(got) != 2 || !strings.HasSuffix(got[1], "/13/"+release) {
		t.Errorf("published %v after the same edit was made again, want a second repair, of version 13", got)
	}
}

// Applications as an operator before the argocd.v2 engine policy wrote them (no comparison
// exceptions) are the EnginePolicyChanged rollout's to write, not drift to repair one by one;
// another edit of one is still forced back. Under argocd.v2, exceptions removed by hand are
// drift.
func TestAnOlderEnginePolicysApplicationsAreTheMovesToWrite(t *testing.T) {
	h := newDriftHarness(t)
	ctx := context.Background()
	h.setRuntime(func(rt *v1alpha1.ClusterRuntime) { rt.Status.EnginePolicy = "" })
	for i, r := range h.plan.Releases {
		old := h.written(t, r.Name)
		old.ResourceVersion = strconv.Itoa(11 + i)
		old.Spec.IgnoreDifferences = nil
		h.change(t, old)
	}
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name}); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.IDs(); len(got) != 0 {
		t.Fatalf("published %v for Applications as the older policy wrote them, want nothing", got)
	}

	release := h.plan.Releases[0].Name
	edited := h.written(t, release)
	edited.ResourceVersion, edited.Spec.IgnoreDifferences = "20", nil
	edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"image":{"tag":"hand"},"replicas":2}`)}
	h.change(t, edited)
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: release}); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.IDs(); len(got) != 1 || !strings.HasSuffix(got[0], "/20/"+release) {
		t.Fatalf("published %v, want one repair of the values edited at version 20", got)
	}

	h.setRuntime(func(rt *v1alpha1.ClusterRuntime) { rt.Status.EnginePolicy = v1alpha1.EnginePolicyArgoCDV2 }) // the move succeeded
	other := h.plan.Releases[1].Name
	if err := h.c.reconcileDrift(ctx, driftKey{runtime: h.rt.Name, release: other}); err != nil {
		t.Fatal(err)
	}
	if got := h.pub.IDs(); len(got) != 2 || !strings.HasSuffix(got[1], "/12/"+other) {
		t.Fatalf("published %v under argocd.v2, want a repair of %s's removed exceptions", got, other)
	}
}
