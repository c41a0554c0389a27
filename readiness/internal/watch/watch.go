// Package watch runs the informer on owned Applications in the engine namespace and turns what
// it sees into bus messages: a ReleaseVerdict when a release's verdict changes, a DriftReport
// when an Application no longer matches what the operator wrote (and when that drift clears),
// and a Deleted DriftReport when an owned Application disappears outside a Remove step. It
// writes nothing to Kubernetes; everything it publishes is rebuilt from the Applications
// themselves, so a restarted watcher publishes the same messages under the same IDs.
package watch

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/readiness/internal/fences"
	"github.com/aicr-run/aicr-operator/readiness/internal/removal"
)

// Selector selects the Applications the operator owns.
var Selector = labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})

// Publisher sends a message; *bus.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// ListWatcher gives the list-watch of the Applications matching a label selector, and reads one
// Application whole: the cache keeps the values as a digest (values.go), and where they differ
// from the plan's the watcher reads the Application to compare and name them.
type ListWatcher interface {
	ListWatch(labelSelector string) *cache.ListWatch
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*argoapp.Application, error)
}

// Watcher publishes what it sees of owned Applications.
type Watcher struct {
	// Apps lists and watches the Applications of the engine namespace; *argoapp.Applications
	// satisfies it.
	Apps ListWatcher
	// Settings render the Application the plan says (for verdicts and drift detection).
	Settings appspec.Settings
	// Plans finds the plan an Application names (required: nothing is judged without it).
	Plans *plan.Cache
	// Removals checks a delete-rollout marker against the rollout it names; nil trusts no
	// marker (every one is drift).
	Removals *removal.Checker
	// Publisher sends verdicts and drift reports.
	Publisher Publisher
	// Metrics counts verdicts, drift and the watch lag; nil for none.
	Metrics *Metrics
	// NoDriftReports stops the drift reports (--drift-reports=false): drift is still detected
	// and logged, but not published. The planner finds every drift from state anyway; the
	// reports only make it find it sooner (the tests that prove that run without them).
	NoDriftReports bool

	queue    workqueue.TypedRateLimitingInterface[string]
	informer cache.SharedIndexInformer

	mu sync.Mutex
	// state is what was last published per Application key.
	state map[string]*published
	// gone holds the last state of deleted Applications until the worker reports them.
	gone map[string]*argoapp.Application
	// initial holds the keys of the informer's first list until it is whole (enqueueInitial).
	initial []string
}

// published is what the watcher last told the planner about one Application.
type published struct {
	uid     string
	verdict string // verdictKey of the last verdict published
	drift   *appspec.Drift
	// reconciled is the Application's status.reconciledAt when last handled (watch lag).
	reconciled time.Time
	// release is the Application's release of the plan of digest releaseOf, the last one it
	// named (release, below).
	release   *plan.Release
	releaseOf string
	// digested: release's values are the digest of the plan's (the Application's are a
	// digest, values.go), not the values.
	digested bool
	// component is the last verdict reached on the Application, for the per-component gauges;
	// written and read under the Watcher's mu.
	component *Component
	// same is whether the values of the digest live are the plan's of digest plan, when the two
	// digests differ (the same values spelled differently): learnt by reading the Application
	// once (sameValues).
	same *sameValues
}

// sameValues is one comparison of an Application's values with its plan's, by their digests.
type sameValues struct {
	live, plan string
	equal      bool
}

// errStale: the Application read from the API server is not the one the cache holds; the
// newer one's event is on its way, and the key is handled again.
var errStale = errors.New("the application read is not the cached one")

// HasSynced reports whether the informer has listed every Application once.
func (w *Watcher) HasSynced() bool {
	return w.informer != nil && w.informer.HasSynced()
}

// Run watches until ctx ends; it returns nil on a clean stop.
func (w *Watcher) Run(ctx context.Context) error {
	log := logging.From(ctx)
	w.state = map[string]*published{}
	w.gone = map[string]*argoapp.Application{}
	w.initial = nil
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "applications"})
	if w.Metrics != nil {
		queued := w.queue.Len
		w.Metrics.queued.Store(&queued)
		components := w.components
		w.Metrics.components.Store(&components)
		defer w.Metrics.components.Store(nil)
	}
	w.informer = cache.NewSharedIndexInformer(w.Apps.ListWatch(Selector.String()), &argoapp.Application{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := w.informer.SetTransform(Transform); err != nil {
		return fmt.Errorf("set application transform: %w", err)
	}
	reg, err := w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				w.holdInitial(obj)
				return
			}
			w.enqueue(obj)
		},
		UpdateFunc: func(_, obj any) { w.enqueue(obj) },
		DeleteFunc: w.deleted,
	})
	if err != nil {
		return fmt.Errorf("add application handler: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { // owned: Run waits for it
		defer wg.Done()
		w.informer.Run(ctx.Done())
	}()
	defer w.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}
	log.Info().Int("applications", w.enqueueInitial()).Msg("application watch synced")
	// Most of the heap is now the initial list's garbage (what Transform cut from every
	// Application: resource lists, history); return it to the OS once instead of holding it
	// until the scavenger gets to it.
	debug.FreeOSMemory()
	wg.Add(1)
	go func() { // owned: Run waits for it
		defer wg.Done()
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for w.next(ctx) {
	}
	return nil
}

func (w *Watcher) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		w.queue.Add(key)
	}
}

// holdInitial keeps the key of an Application of the informer's first list for enqueueInitial.
func (w *Watcher) holdInitial(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		w.mu.Lock()
		w.initial = append(w.initial, key)
		w.mu.Unlock()
	}
}

// enqueueInitial queues the Applications of the first list grouped by the plan they name, and
// returns how many there were. The list comes in no useful order (a streaming list hands it
// over from a map), and judging an Application needs its plan: in list order, with more plans
// named than the plan cache holds, nearly every Application read and decoded its plan again
// (a plan of 40 GPU-stack releases is about half a MiB). Grouped, each plan is read once.
func (w *Watcher) enqueueInitial() int {
	w.mu.Lock()
	keys := w.initial
	w.initial = nil
	w.mu.Unlock()
	digests := make(map[string]string, len(keys))
	store := w.informer.GetStore()
	for _, key := range keys {
		if obj, ok, err := store.GetByKey(key); err == nil && ok {
			if app, ok := obj.(*argoapp.Application); ok {
				digests[key] = app.Annotations[v1alpha1.AnnotationPlanDigest]
			}
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(strings.Compare(digests[a], digests[b]), strings.Compare(a, b))
	})
	for _, key := range keys {
		w.queue.Add(key)
	}
	return len(keys)
}

func (w *Watcher) deleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(app)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.gone[key] = app
	w.mu.Unlock()
	w.queue.Add(key)
}

// next handles one key; false once the queue shut down.
func (w *Watcher) next(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(key)
	if err := w.handle(ctx, key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, errStale) {
			w.queue.AddRateLimited(key)
			return true
		}
		logging.From(ctx).Warn().Err(err).Str(logging.KeyResourceName, key).Msg("handle application, retrying")
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// handle publishes what changed for one Application. It is idempotent: handling the same
// observation twice publishes nothing the second time, and the message IDs are derived from
// the observation, so a republish after a restart is dropped by JetStream.
func (w *Watcher) handle(ctx context.Context, key string) error {
	w.mu.Lock()
	old := w.gone[key]
	w.mu.Unlock()
	if old != nil {
		if err := w.reportDeleted(ctx, key, old); err != nil {
			return err
		}
		w.mu.Lock()
		if w.gone[key] == old {
			delete(w.gone, key)
		}
		w.mu.Unlock()
	}
	obj, exists, err := w.informer.GetStore().GetByKey(key)
	if err != nil {
		return fmt.Errorf("get %s from cache: %w", key, err)
	}
	if !exists {
		return nil
	}
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return nil
	}
	st := w.stateFor(key, string(app.UID))
	st.reconciled = w.Metrics.observeReconcile(app, st.reconciled, time.Now())
	removing, err := w.removing(ctx, app)
	if err != nil {
		return err
	}
	if removing {
		// Under a Remove step the applier reports Removed, and a verdict on the Application's
		// last step would read as that step's readiness: nothing is published, and the release,
		// on its way out, is no component to report.
		w.mu.Lock()
		st.component = nil
		w.mu.Unlock()
		return nil
	}
	pl, err := w.plan(ctx, app, st)
	if err != nil {
		return err
	}
	if err := w.sameValues(ctx, app, &pl, st); err != nil {
		return err
	}
	// Drift first: the planner orders the two by resourceVersion, but a report that the spec
	// was edited usually arriving before the verdict that says why it is not ready reads better.
	if err := w.publishDrift(ctx, app, pl, st); err != nil {
		return err
	}
	return w.publishVerdict(ctx, app, pl, st)
}

// components is the last verdict of every Application judged, ordered by namespace and name.
func (w *Watcher) components() []Component {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := slices.Sorted(maps.Keys(w.state))
	out := make([]Component, 0, len(keys))
	for _, k := range keys {
		if c := w.state[k].component; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

func (w *Watcher) stateFor(key, uid string) *published {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state[key]
	if st == nil || st.uid != uid {
		st = &published{uid: uid}
		w.state[key] = st
	}
	return st
}

func (w *Watcher) reportDeleted(ctx context.Context, key string, app *argoapp.Application) error {
	w.mu.Lock()
	if st := w.state[key]; st != nil && st.uid == string(app.UID) {
		delete(w.state, key)
	}
	w.mu.Unlock()
	removing, err := w.removing(ctx, app)
	if err != nil {
		return err
	}
	if w.Removals != nil {
		w.Removals.Forget(app)
	}
	if removing {
		return nil // an approved Remove step: the applier reports Removed
	}
	r := &bus.DriftReport{
		Runtime:         app.Labels[v1alpha1.LabelRuntime],
		Release:         app.Name,
		PlanDigest:      app.Annotations[v1alpha1.AnnotationPlanDigest],
		StepID:          app.Annotations[v1alpha1.AnnotationStep],
		Kinds:           []string{bus.DriftDeleted},
		ResourceVersion: app.ResourceVersion,
	}
	id := fmt.Sprintf("%s/deleted/%s", app.Name, app.UID)
	if w.NoDriftReports {
		logging.From(ctx).Info().Str(logging.KeyRelease, app.Name).Str(logging.KeyRuntime, r.Runtime).Msg("owned application deleted; no drift report (--drift-reports=false)")
		return nil
	}
	if err := w.Publisher.Publish(ctx, bus.DriftSubject(r.Runtime, r.Release), id, r); err != nil {
		return err
	}
	w.Metrics.observeDrift(r.Kinds)
	logging.From(ctx).Info().Str(logging.KeyRelease, app.Name).Str(logging.KeyRuntime, r.Runtime).Msg("owned application deleted")
	return nil
}

// removing reports whether app is under a Remove step: its delete-rollout marker checked
// against the rollout it names. A marker that is not (set by hand, or naming a rollout that
// started no Remove of the release since it was written) silences nothing: appspec.Detect
// reports it, and the planner repairs it like any other drift.
func (w *Watcher) removing(ctx context.Context, app *argoapp.Application) (bool, error) {
	if w.Removals == nil || !removal.Marked(app) {
		return false, nil
	}
	return w.Removals.Removing(ctx, app)
}

func (w *Watcher) publishVerdict(ctx context.Context, app *argoapp.Application, pl fences.Plan, st *published) error {
	v := fences.Evaluate(app, pl)
	w.mu.Lock()
	st.component = newComponent(app, v)
	w.mu.Unlock()
	content := verdictContent(v)
	key := verdictKey(app, content)
	if key == st.verdict {
		return nil
	}
	stepID := app.Annotations[v1alpha1.AnnotationStep]
	m := &bus.ReleaseVerdict{
		Runtime:    app.Labels[v1alpha1.LabelRuntime],
		Release:    app.Name,
		StepID:     stepID,
		RolloutUID: app.Annotations[v1alpha1.AnnotationStepRolloutUID],
		PlanDigest: app.Annotations[v1alpha1.AnnotationPlanDigest],
		Ready:      v.Ready,
		Failed:     v.Failed,
		Fences:     v.Fences,
		Observed:   v.Observed,
	}
	// The first verdict this process publishes for the Application has the ID a restarted
	// watcher gives the same observation; each later one, a change it saw, also carries the
	// resourceVersion, so a return to an earlier verdict (ready, an error condition that came
	// and went, ready) is news even when no time it hashes moved.
	if err := w.Publisher.Publish(ctx, bus.VerdictSubject(m.Runtime, m.Release), VerdictID(app, key, st.verdict != ""), m); err != nil {
		return err
	}
	st.verdict = key
	w.Metrics.observeVerdict(v)
	logging.From(ctx).Debug().Str(logging.KeyRelease, app.Name).Str(logging.KeyStep, stepID).Bool("ready", v.Ready).Bool("failed", v.Failed).Msg("verdict published")
	return nil
}

// verdictContent is what decides whether a verdict changed: readiness and each fence's state
// and message (the observed status, which moves with every reconcile, is left out).
func verdictContent(v fences.Verdict) string {
	raw, _ := json.Marshal(struct {
		Ready  bool             `json:"r"`
		Failed bool             `json:"f"`
		Fences []v1alpha1.Fence `json:"x"`
	}{v.Ready, v.Failed, v.Fences})
	return string(raw)
}

// verdictKey is what makes a verdict news: its content for the step that last wrote the
// Application, the step (ID and rollout UID: v1alpha1.StepToken) and its start. A step written
// again with the same spec (a rollout of the same name created again, as when a move is undone
// and redone within seconds) leaves the content as it was, ready; the step's rollout still
// waits for a verdict of its own. The start alone cannot tell two rollouts apart whose steps
// began in the same second; their UIDs can.
func verdictKey(app *argoapp.Application, content string) string {
	return content + "\x00" + v1alpha1.AnnotatedStepToken(app.Annotations) + "\x00" + app.Annotations[v1alpha1.AnnotationStepStarted]
}

// VerdictID is the message ID of a verdict: the release and step, and a hash of the verdict's
// key (verdictKey: its content, the step and the step's start) with the facts that mark one
// episode of it (the Application's UID, the health
// transition time, the operation's start and finish) and, for a change the watcher saw
// (seen), the resourceVersion it saw it at. The first verdict on an observation always gives the same ID,
// so a restarted watcher's republish is dropped; a verdict that returns after a change is new.
func VerdictID(app *argoapp.Application, key string, seen bool) string {
	h := sha256.New()
	h.Write([]byte(key))
	fmt.Fprintf(h, "\x00%s", app.UID)
	if t := app.Status.Health.LastTransitionTime; t != nil {
		fmt.Fprintf(h, "\x00h%d", t.Unix())
	}
	if os := app.Status.OperationState; os != nil {
		fmt.Fprintf(h, "\x00s%d", os.StartedAt.Unix())
		if os.FinishedAt != nil {
			fmt.Fprintf(h, "\x00f%d", os.FinishedAt.Unix())
		}
	}
	if seen {
		fmt.Fprintf(h, "\x00rv%s", app.ResourceVersion)
	}
	return fmt.Sprintf("%s/%s/%s", app.Name, app.Annotations[v1alpha1.AnnotationStep], hex.EncodeToString(h.Sum(nil))[:16])
}

func (w *Watcher) publishDrift(ctx context.Context, app *argoapp.Application, pl fences.Plan, st *published) error {
	if pl.Want == nil {
		return nil
	}
	r := appspec.Detect(app, pl.Want)
	if !r.Empty() && touchesValues(r.Fields) && isDigest(liveValues(app)) {
		// The values, or something above them, differ: their fields and whoever took them
		// over are named from the values, which the cache holds as a digest.
		full, err := w.fullDrift(ctx, app, pl.Digest)
		if err != nil {
			return err
		}
		r = full
	}
	switch {
	case st.drift == nil && r.Empty():
		return nil // never reported, nothing to report
	case st.drift != nil && st.drift.Equal(r):
		return nil
	}
	m := &bus.DriftReport{
		Runtime:         app.Labels[v1alpha1.LabelRuntime],
		Release:         app.Name,
		PlanDigest:      app.Annotations[v1alpha1.AnnotationPlanDigest],
		StepID:          app.Annotations[v1alpha1.AnnotationStep],
		Kinds:           r.Kinds,
		Fields:          r.Fields,
		Managers:        r.Managers,
		ResourceVersion: app.ResourceVersion,
	}
	if m.Kinds == nil {
		m.Kinds = []string{}
	}
	if !w.NoDriftReports {
		if err := w.Publisher.Publish(ctx, bus.DriftSubject(m.Runtime, m.Release), driftID(app, r), m); err != nil {
			return err
		}
		w.Metrics.observeDrift(m.Kinds)
	}
	log := logging.From(ctx).Info().Str(logging.KeyRelease, app.Name).Strs("kinds", r.Kinds).Strs("fields", r.Fields).Strs("managers", r.Managers)
	if r.Empty() {
		log.Msg("drift cleared")
		st.drift = nil
	} else {
		log.Msg("drift detected")
		st.drift = &r
	}
	return nil
}

// driftID identifies one drift observation: the release, a hash of what drifted and the
// resourceVersion it was seen at (a drift that returns after being repaired is news again).
func driftID(app *argoapp.Application, r appspec.Drift) string {
	raw, _ := json.Marshal(r)
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("%s/drift/%s/%s", app.Name, hex.EncodeToString(sum[:])[:16], app.ResourceVersion)
}

// release returns app's release of the plan of digest, or nil and why it cannot be known; an
// error is a failed read, retried. It keeps the release in st (detached from its plan, its values
// the digest of the plan's when the Application's are a digest, else shared with the
// Application's own when they are the same bytes), so that the events that do
// not move the Application to another plan (Argo CD writes every Application's status at each
// refresh, in no order) read no plan: with more plans named than the plan cache holds, every one
// of them used to read a plan from the API server and decode it again.
func (w *Watcher) release(ctx context.Context, app *argoapp.Application, digest string, st *published) (*plan.Release, string, error) {
	live := liveValues(app)
	if r := st.release; r != nil && st.releaseOf == digest && st.digested == isDigest(live) { // st is this Application's: same name
		// Point the kept values at this copy of the Application's own, so the copy the
		// informer has replaced can go (digests: nothing to share, the kept one is the plan's).
		if v, err := r.ValuesJSON(); !st.digested && err == nil && len(v) > 0 && len(live) > 0 && &v[0] != &live[0] && bytes.Equal(v, live) {
			*r = r.Detached(live)
		}
		return r, "", nil
	}
	r, missing, err := w.planRelease(ctx, app, digest)
	if err != nil || r == nil {
		return nil, missing, err
	}
	var d plan.Release
	if isDigest(live) {
		v, err := r.ValuesJSON()
		if err != nil {
			return nil, fmt.Sprintf("release %s of plan %s has no values: %v", app.Name, digest, err), nil
		}
		d = r.DetachedWith(valuesDigest(v))
	} else {
		d = r.Detached(live)
	}
	st.release, st.releaseOf, st.digested = &d, digest, isDigest(live)
	return &d, "", nil
}

// planRelease returns app's release of the plan of digest, as the plan holds it, or nil and why
// it cannot be known; an error is a failed read, retried.
func (w *Watcher) planRelease(ctx context.Context, app *argoapp.Application, digest string) (*plan.Release, string, error) {
	p, err := w.Plans.Get(ctx, digest)
	if plan.IsUnreadable(err) {
		logging.From(ctx).Warn().Str(logging.KeyRelease, app.Name).Str(logging.KeyPlanDigest, digest).Err(err).Msg("plan named by the application cannot be read; not judged, drift not checked")
		return nil, fmt.Sprintf("plan %s, named by annotation %s, cannot be read from the operator namespace (%v)", digest, v1alpha1.AnnotationPlanDigest, err), nil
	}
	if err != nil {
		return nil, "", err
	}
	r, ok := p.Release(app.Name)
	if !ok {
		logging.From(ctx).Warn().Str(logging.KeyRelease, app.Name).Str(logging.KeyPlanDigest, digest).Msg("plan has no release of the application's name; drift not checked")
		return nil, fmt.Sprintf("plan %s has no release %s", digest, app.Name), nil
	}
	return r, "", nil
}

// read gets app from the API server whole (the cache holds its values as a digest), as the
// cache holds it: errStale when the API server has another version, whose event comes.
func (w *Watcher) read(ctx context.Context, app *argoapp.Application) (*argoapp.Application, error) {
	full, err := w.Apps.Get(ctx, app.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errStale // its delete event comes
	}
	if err != nil {
		return nil, fmt.Errorf("read application %s: %w", app.Name, err)
	}
	if full.UID != app.UID || full.ResourceVersion != app.ResourceVersion {
		return nil, errStale
	}
	return full, nil
}

// sameValues makes pl.Want's values app's digest when the two digests differ but the values are
// the same: another spelling of the plan's values (1.0 for 1), which the plan fence and drift
// detection compare as JSON. It reads the Application once per pair of digests.
func (w *Watcher) sameValues(ctx context.Context, app *argoapp.Application, pl *fences.Plan, st *published) error {
	if pl.Want == nil {
		return nil
	}
	live, want := liveValues(app), valuesOf(pl.Want.Spec.Source)
	if !isDigest(live) || want == nil || bytes.Equal(live, want) {
		return nil
	}
	same := st.same
	if same == nil || same.live != string(live) || same.plan != string(want) {
		full, err := w.read(ctx, app)
		if err != nil {
			return err
		}
		r, _, err := w.planRelease(ctx, app, pl.Digest)
		if err != nil || r == nil {
			return err // a plan or release gone since st.release was kept: the next event reads it again
		}
		v, err := r.ValuesJSON()
		if err != nil {
			return nil
		}
		same = &sameValues{live: string(live), plan: string(want), equal: appspec.EqualValues(liveValues(full), v)}
		st.same = same
	}
	if same.equal {
		pl.Want.Spec.Source.Helm.ValuesObject = app.Spec.Source.Helm.ValuesObject
	}
	return nil
}

// fullDrift is the drift of app read whole from the API server against the Application its plan
// says, values included: what Detect names where the cached values (a digest) differ.
func (w *Watcher) fullDrift(ctx context.Context, app *argoapp.Application, digest string) (appspec.Drift, error) {
	full, err := w.read(ctx, app)
	if err != nil {
		return appspec.Drift{}, err
	}
	r, missing, err := w.planRelease(ctx, app, digest)
	if err != nil {
		return appspec.Drift{}, err
	}
	if r == nil {
		return appspec.Drift{}, fmt.Errorf("drift of %s: %s", app.Name, missing)
	}
	want, err := w.build(app, digest, r)
	if err != nil {
		return appspec.Drift{}, fmt.Errorf("drift of %s: %w", app.Name, err)
	}
	return appspec.Detect(full, want), nil
}

// liveValues returns the Helm values of app's spec as they came from the API server, or nil.
func liveValues(app *argoapp.Application) []byte {
	if src := app.Spec.Source; src != nil && src.Helm != nil && src.Helm.ValuesObject != nil {
		return src.Helm.ValuesObject.Raw
	}
	return nil
}

// plan renders what the operator wrote for app from the plan it names: the Application both
// the verdict and drift detection compare with. When that cannot be known (no plan annotation,
// the plan or the release gone) Want is nil and Missing says why; an error is a failed read,
// retried.
func (w *Watcher) plan(ctx context.Context, app *argoapp.Application, st *published) (fences.Plan, error) {
	digest := app.Annotations[v1alpha1.AnnotationPlanDigest]
	pl := fences.Plan{Digest: digest}
	if digest == "" {
		pl.Missing = "the Application carries no " + v1alpha1.AnnotationPlanDigest + " annotation"
		return pl, nil
	}
	r, missing, err := w.release(ctx, app, digest, st)
	if err != nil || r == nil {
		pl.Missing = missing
		return pl, err
	}
	want, err := w.build(app, digest, r)
	if err != nil {
		pl.Missing = fmt.Sprintf("release %s of plan %s does not render: %v", app.Name, digest, err)
		return pl, nil
	}
	pl.Want = want
	return pl, nil
}

// build renders release r of the plan of digest as the operator wrote it for app.
func (w *Watcher) build(app *argoapp.Application, digest string, r *plan.Release) (*argoapp.Application, error) {
	started, _ := time.Parse(time.RFC3339, app.Annotations[v1alpha1.AnnotationStepStarted])
	// Rendered with the engine running: the engine-suspended annotation is not taken on trust.
	// Automated sync off is reported (AutoSyncDisabled); the planner, which reads the runtime's
	// spec.suspendEngine, decides whether that is drift.
	return appspec.Build(w.Settings, appspec.Input{
		Runtime:        app.Labels[v1alpha1.LabelRuntime],
		RuntimeUID:     app.Annotations[v1alpha1.AnnotationRuntimeUID],
		PlanDigest:     digest,
		Release:        r,
		StepID:         app.Annotations[v1alpha1.AnnotationStep],
		StepStarted:    started,
		StepRolloutUID: app.Annotations[v1alpha1.AnnotationStepRolloutUID],
	})
}
