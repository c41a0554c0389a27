package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// DefaultDriftResync is how often every release of every runtime is checked for drift when
// nothing else asked (--drift-resync): the bound on how long an edit stands when every hint of
// it (an Application event the planner missed, readiness's report) was lost.
const DefaultDriftResync = 30 * time.Second

// goneApp is what the drift loop remembers of an Application, for when it is deleted.
type goneApp struct{ uid, step, stepRolloutUID string }

// driftKey is one drift check: a release of a runtime, or (release empty) every release.
type driftKey struct{ runtime, release string }

// appDrift is the planner's level-triggered drift loop: an informer on the owned Applications
// (label-selected, in the engine namespace) and a queue of checks. A check reads the live
// Application and what its release must be (rollout.ExpectedPlan), compares them with
// appspec.Detect and decides as a report would (decideDrift). Checks are queued by Application
// events, by the end of a step or a rollout, by a runtime's change, by readiness's drift
// reports (hints) and every resync; a check of the same state decides the same and publishes
// nothing new (the repair's message ID is derived from the Application's resourceVersion).
type appDrift struct {
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[driftKey]
	// seen is what the informer's handlers (add, update, delete) last saw of each Application,
	// by name. Once it is deleted, a rewrite is tagged with its UID, so the next deletion is news
	// again, and the step that wrote it tells a step's write that landed from one on its way.
	// It is recorded before deletion, not by the delete handler: the informer's store drops a
	// deleted Application before that handler runs, and a check in between must tag the rewrite
	// as a check after it does (not with the epoch, nor with an earlier deletion's UID, a tag
	// already used, so its command would be dropped as a duplicate).
	mu   sync.Mutex
	seen map[string]goneApp
	// epoch tags a rewrite of an Application deleted before this process saw it.
	epoch string
}

func newAppDrift(lw cache.ListerWatcher, now time.Time) *appDrift {
	inf := cache.NewSharedIndexInformer(lw, &argoapp.Application{}, 0, cache.Indexers{})
	_ = inf.SetTransform(trimApplication) // only fails once the informer runs
	return &appDrift{
		informer: inf,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[driftKey](),
			workqueue.TypedRateLimitingQueueConfig[driftKey]{Name: "drift"}),
		seen:  map[string]goneApp{},
		epoch: strconv.FormatInt(now.Unix(), 36),
	}
}

// see records what the informer's handlers last saw of an Application (seen); a tombstone's
// object is the store's last state of it.
func (d *appDrift) see(obj any) {
	if app, ok := obj.(*argoapp.Application); ok {
		d.mu.Lock()
		d.seen[app.Name] = goneApp{uid: string(app.UID), step: app.Annotations[v1alpha1.AnnotationStep], stepRolloutUID: app.Annotations[v1alpha1.AnnotationStepRolloutUID]}
		d.mu.Unlock()
	}
}

// trimApplication keeps of a cached Application what a drift check reads: its metadata (the
// managedFields Detect reads) and spec; Argo CD's status, the largest part, is dropped.
func trimApplication(obj any) (any, error) {
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return obj, nil
	}
	app.Status = argoapp.ApplicationStatus{}
	app.Operation = nil
	app.ManagedFields = appspec.TrimManagedFields(app.ManagedFields)
	return app, nil
}

// runDrift starts the Application informer, the drift worker and the resync ticker. It does
// not wait for the informer: without Argo CD's CRDs (EngineMissing) the list fails until they
// appear, and every check waits for the cache to sync; the rest of the planner goes on.
func (c *Controller) runDrift(ctx context.Context, wg *sync.WaitGroup) error {
	d := c.drift
	if _, err := d.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			d.see(obj)
			c.appChanged(obj)
		},
		UpdateFunc: func(old, obj any) {
			d.see(obj)
			if meaningfulChange(old, obj) {
				c.appChanged(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			d.see(obj)
			c.appChanged(obj)
		},
	}); err != nil {
		return fmt.Errorf("add application event handler: %w", err)
	}
	wg.Add(3)
	go func() { defer wg.Done(); d.informer.RunWithContext(ctx) }()
	go func() {
		defer wg.Done()
		for c.driftWork(ctx) {
		}
	}()
	go func() {
		defer wg.Done()
		// Once the cache holds the Applications, check every release: a deleted Application
		// has no event to tell of it.
		if !cache.WaitForCacheSync(ctx.Done(), d.informer.HasSynced) {
			return
		}
		tick := c.cfg.Clock.NewTicker(c.cfg.DriftResync)
		defer tick.Stop()
		for {
			c.checkAll()
			select {
			case <-ctx.Done():
				return
			case <-tick.C():
			}
		}
	}()
	go func() { <-ctx.Done(); d.queue.ShutDown() }()
	return nil
}

// meaningfulChange reports whether an Application update touched what drift compares: its
// spec, labels, annotations, finalizers, deletion or field managers. Argo CD's status writes
// at each refresh do not.
func meaningfulChange(old, obj any) bool {
	o, ok1 := old.(*argoapp.Application)
	n, ok2 := obj.(*argoapp.Application)
	if !ok1 || !ok2 {
		return true
	}
	return o.UID != n.UID || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Annotations, n.Annotations) ||
		!slices.Equal(o.Finalizers, n.Finalizers) || !reflect.DeepEqual(o.Spec, n.Spec) ||
		!reflect.DeepEqual(o.ManagedFields, n.ManagedFields)
}

// appChanged queues a check of the Application's release.
func (c *Controller) appChanged(obj any) {
	if app, ok := obj.(*argoapp.Application); ok && app.Labels[v1alpha1.LabelRuntime] != "" {
		c.checkRelease(app.Labels[v1alpha1.LabelRuntime], app.Name)
	}
}

// checkRelease queues a drift check of one release (nothing when the loop is off).
func (c *Controller) checkRelease(runtime, release string) {
	if c.drift != nil {
		c.drift.queue.Add(driftKey{runtime: runtime, release: release})
	}
}

// checkRuntime queues a drift check of every release of a runtime.
func (c *Controller) checkRuntime(runtime string) {
	if c.drift != nil {
		c.drift.queue.Add(driftKey{runtime: runtime})
	}
}

// checkAll queues a drift check of every release of every runtime.
func (c *Controller) checkAll() {
	c.mu.Lock()
	names := c.names
	c.mu.Unlock()
	for _, n := range names() {
		c.checkRuntime(n)
	}
}

func (c *Controller) driftWork(ctx context.Context) bool {
	k, shutdown := c.drift.queue.Get()
	if shutdown {
		return false
	}
	defer c.drift.queue.Done(k)
	if err := c.reconcileDrift(ctx, k); err != nil && ctx.Err() == nil {
		logging.From(ctx).Warn().Err(err).Str(logging.KeyRuntime, k.runtime).Str(logging.KeyRelease, k.release).Msg("drift check, will retry")
		c.drift.queue.AddRateLimited(k)
		return true
	}
	c.drift.queue.Forget(k)
	return true
}

// reconcileDrift checks one release, or every release, of a runtime against what it must be,
// under the runtime's lock, and decides what a report of the difference would decide.
func (c *Controller) reconcileDrift(ctx context.Context, k driftKey) error {
	if !c.drift.informer.HasSynced() {
		return nil // the check after the sync covers it
	}
	unlock := c.locks.lock(k.runtime)
	defer unlock()
	ctx = logging.Into(ctx, logging.From(ctx).With().Str(logging.KeyRuntime, k.runtime).Logger())
	rt, err := c.store.GetRuntime(ctx, k.runtime)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runtime %s: %w", k.runtime, err)
	}
	if rt.DeletionTimestamp != nil {
		return nil // the stack is being removed or left: nothing to repair
	}
	rollouts, err := c.store.ListRollouts(ctx, k.runtime)
	if err != nil {
		return fmt.Errorf("list rollouts of %s: %w", k.runtime, err)
	}
	inflight := inFlightOf(rt, rollouts)
	if inflight == nil && runtimeBehind(rt, rollouts) {
		return nil // the runtime's active plan is not written yet: its change checks again
	}
	h, err := c.holding(ctx, rt, rt.Status.ActivePlan, rollouts, nil)
	if err != nil {
		return err
	}
	releases := []string{k.release}
	if k.release == "" {
		releases = releases[:0]
		for name := range h.Digests {
			releases = append(releases, name)
		}
		sort.Strings(releases)
	}
	for _, name := range releases {
		d, digest, seen, ok, err := c.observeRelease(ctx, rt, h, inflight, name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if len(d.Kinds) == 0 {
			c.forgetRepair(rt.Name, name)
		}
		if inflight != nil && len(d.Kinds) == 0 && !rollout.HoldsDrift(inflight, name) {
			continue // nothing to clear: the rollout is not written for it
		}
		if inflight, err = c.decideDrift(ctx, rt, rollouts, inflight, d, digest, seen); err != nil {
			return err
		}
	}
	return nil
}

// runtimeBehind reports whether the runtime's status has not caught up with its latest rollout:
// the rollout written last (the highest resourceVersion, never a clock) succeeded, but the
// runtime's active plan is not yet that rollout's. Judged then, the releases the rollout moved
// or removed would be held at the plan before it, and a repair would roll its writes back or
// write a removed release again.
func runtimeBehind(rt *v1alpha1.ClusterRuntime, rollouts []v1alpha1.RuntimeRollout) bool {
	var last *v1alpha1.RuntimeRollout
	for i := range rollouts {
		r := &rollouts[i]
		if r.Spec.RuntimeUID != string(rt.UID) {
			continue
		}
		if last == nil {
			last = r
			continue
		}
		if cmp, ok := v1alpha1.CompareSeq(r.ResourceVersion, last.ResourceVersion); ok && cmp > 0 {
			last = r
		}
	}
	return last != nil && last.Status.Phase == v1alpha1.PhaseSucceeded && last.Spec.ToDigest != rt.Status.ActivePlan
}

// inFlightOf is the runtime's rollout in flight, or nil.
func inFlightOf(rt *v1alpha1.ClusterRuntime, rollouts []v1alpha1.RuntimeRollout) *v1alpha1.RuntimeRollout {
	for i := range rollouts {
		if !rollouts[i].Status.Phase.Terminal() && rollouts[i].Status.Phase != "" && rollouts[i].Spec.RuntimeUID == string(rt.UID) {
			return &rollouts[i]
		}
	}
	return nil
}

// observeRelease compares a release's live Application with what it must be and returns the
// drift as readiness would report it, the plan to repair from, and what was seen (the tag that
// names this observation and the basis a repair carries). ok is false when nothing is to be
// judged now.
func (c *Controller) observeRelease(ctx context.Context, rt *v1alpha1.ClusterRuntime, h rollout.Holding, inflight *v1alpha1.RuntimeRollout, name string) (d *bus.DriftReport, digest string, seen observation, ok bool, err error) {
	obj, exists, err := c.drift.informer.GetStore().GetByKey(c.cfg.EngineNamespace + "/" + name)
	if err != nil {
		return nil, "", observation{}, false, fmt.Errorf("get application %s from cache: %w", name, err)
	}
	app, _ := obj.(*argoapp.Application)
	live := rollout.Live{Exists: exists && app != nil}
	c.drift.mu.Lock()
	gone := c.drift.seen[name] // read only when the Application is missing
	c.drift.mu.Unlock()
	if !live.Exists {
		live.GoneStep, live.GoneStepRolloutUID = gone.step, gone.stepRolloutUID
	}
	if live.Exists {
		if app.DeletionTimestamp != nil {
			return nil, "", observation{}, false, nil // on its way out; once gone, written again if the stack holds it
		}
		live.Step, live.StepRolloutUID = app.Annotations[v1alpha1.AnnotationStep], app.Annotations[v1alpha1.AnnotationStepRolloutUID]
		live.PlanDigest = app.Annotations[v1alpha1.AnnotationPlanDigest]
		live.PlanDigestOurs = !appspec.TakenOver(app, v1alpha1.AnnotationPlanDigest)
	}
	digest, judge := rollout.ExpectedPlan(h, inflight, name, live)
	if !judge {
		return nil, "", observation{}, false, nil
	}
	d = &bus.DriftReport{Runtime: rt.Name, Release: name, PlanDigest: digest}
	if !live.Exists {
		uid := gone.uid
		if uid == "" {
			uid = c.drift.epoch
		}
		d.Kinds = []string{bus.DriftDeleted}
		return d, digest, observation{tag: "gone-" + uid, basis: &bus.Basis{}}, true, nil
	}
	p, err := c.loadPlan(ctx, digest)
	if err != nil {
		return nil, "", observation{}, false, fmt.Errorf("read plan %s release %s must be at: %w", digest, name, err)
	}
	r, found := p.Release(name)
	if !found {
		return nil, "", observation{}, false, nil
	}
	started, _ := time.Parse(time.RFC3339, app.Annotations[v1alpha1.AnnotationStepStarted])
	want, err := appspec.Build(c.cfg.Settings, appspec.Input{
		Runtime: rt.Name, RuntimeUID: string(rt.UID), PlanDigest: digest, Release: r,
		StepID: live.Step, StepStarted: started, StepRolloutUID: live.StepRolloutUID,
	})
	if err != nil {
		return nil, "", observation{}, false, fmt.Errorf("render release %s of plan %s: %w", name, digest, err)
	}
	if olderEnginePolicy(rt) && len(app.Spec.IgnoreDifferences) == 0 {
		// Written under the engine policy before argocd.v2 (comparison exceptions in argocd-cm,
		// none on the Application): the EnginePolicyChanged rollout writes every release again
		// with them. Adding them is that rollout's write, not a repair: one each, with its
		// FieldOwnershipOverridden Event, ahead of a rollout that writes them anyway, would
		// make the move's step writes unchanged. Any other difference is still drift.
		want.Spec.IgnoreDifferences = nil
	}
	// A delete-rollout marker is no Remove step's here (ExpectedPlan judges none of those).
	diff := appspec.Detect(app, want)
	d.StepID, d.ResourceVersion = live.Step, app.ResourceVersion
	d.Kinds, d.Fields, d.Managers = diff.Kinds, diff.Fields, diff.Managers
	if d.Kinds == nil {
		d.Kinds = []string{}
	}
	return d, digest, observation{tag: app.ResourceVersion, basis: &bus.Basis{
		UID: string(app.UID), ResourceVersion: app.ResourceVersion, Step: v1alpha1.AnnotatedStepToken(app.Annotations),
	}}, true, nil
}

// observation is what a drift check saw of a release's Application.
type observation struct {
	// tag names it in a repair's message ID: the Application's resourceVersion, or
	// "gone-<UID>" of the deleted one (bound to the process's start when it saw no deletion).
	tag string
	// basis is the repair's ordering token (bus.Basis); nil from a drift report.
	basis *bus.Basis
}

// stepEnds lists the releases whose step ended (succeeded or failed) between two versions of a
// rollout's status, and whether the rollout itself ended.
func stepEnds(old, cur *v1alpha1.RuntimeRollout) (releases []string, ended bool) {
	ended = !old.Status.Phase.Terminal() && cur.Status.Phase.Terminal()
	was := make(map[int32]v1alpha1.StepState, len(old.Status.Steps))
	for _, s := range old.Status.Steps {
		was[s.Index] = s.State
	}
	for _, s := range cur.Status.Steps {
		if (s.State == v1alpha1.StepSucceeded || s.State == v1alpha1.StepFailed) && was[s.Index] != s.State {
			releases = append(releases, s.Release)
		}
	}
	return releases, ended
}

// olderEnginePolicy reports whether the runtime's Applications are recorded as written under an
// engine policy before argocd.v2 (status.enginePolicy empty or older, with an active plan): an
// EnginePolicyChanged rollout is due or in flight (rollout.ChooseTarget), and the status says
// argocd.v2 once it succeeds. Until then, an Application without comparison exceptions is as
// that policy wrote it.
func olderEnginePolicy(rt *v1alpha1.ClusterRuntime) bool {
	return rt.Status.ActivePlan != "" && rt.Status.EnginePolicy != v1alpha1.EnginePolicyArgoCDV2
}
