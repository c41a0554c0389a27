// Package controller is the planner's reconcile loop: informers on ClusterRuntimes,
// RuntimeRollouts and ConfigMaps feed a work queue keyed by runtime; NATS events (verdicts,
// apply results, drift, engine and credentials news) are handled at once. Both take the
// runtime's lock, so one runtime's state is changed by one goroutine at a time; every write
// re-reads and re-applies on a conflict. The controller reads, calls the decisions and writes:
// the decisions themselves live in package rollout and package status. Sync lists the phases
// of one reconcile.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Publisher publishes one message (bus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// Config tunes the controller.
type Config struct {
	// Name is the binary's name (Event source).
	Name string
	// Namespace is the operator namespace: plans live there.
	Namespace string
	// EngineNamespace is Argo CD's namespace (no component may be installed there).
	EngineNamespace string
	// Identities are the operator's own user names: approvals by them are ignored.
	Identities []string
	// Clock is the planner's clock.
	Clock clock.WithTicker
	// Workers is how many runtimes are reconciled at once (1 when zero).
	Workers int
	// Resync is the informers' resync period (10 minutes when zero).
	Resync time.Duration
	// Recorder records the Events on runtimes and rollouts (NewRecorder); none are recorded
	// when nil.
	Recorder record.EventRecorder
	// Metrics are the planner's metrics (NewMetrics); unregistered ones when nil.
	Metrics *Metrics
	// Bundles pulls OCI bundles (spec.bundle.oci); a runtime naming one is BundleUnavailable
	// when nil.
	Bundles BundlePuller
	// Applications lists and watches the owned Applications (label-selected, in the engine
	// namespace: argoapp's ListWatch). When set, drift is reconciled from state (drift.go):
	// readiness's reports are hints. When nil, each report's content decides.
	Applications cache.ListerWatcher
	// Settings render what an Application must be (appspec.Build), for the drift checks.
	Settings appspec.Settings
	// DriftResync is how often every release is checked for drift anyway (DefaultDriftResync
	// when zero).
	DriftResync time.Duration
	// Parked is the parked stream: read every ParkedPoll for the MessagesParked condition, and
	// retried on AnnotationRetryParked. Neither happens when nil.
	Parked ParkedStream
	// ParkedPoll is how often the parked stream is read (ParkedPoll when zero).
	ParkedPoll time.Duration
}

// Controller makes the planner's decisions for every ClusterRuntime.
type Controller struct {
	cfg   Config
	store Store        // every step in Status.Steps (stepStore), read through cache once Run's informers synced
	cache *cachedStore // the Store beneath, to attach the informers
	pub   Publisher
	queue workqueue.TypedRateLimitingInterface[string]
	locks keyedLocks
	notes notes

	plans *plan.Cache // by digest, read through store

	mu         sync.Mutex
	resolved   map[string]resolution // by runtime
	published  map[string]bool       // message IDs published by this process
	engine     *bus.EngineStatus
	creds      *bus.CredentialsStatus
	engineSeq  uint64                // the stream sequence of the engine report held (handleEngine)
	credsSeq   uint64                // and of the credentials report
	names      func() []string       // runtime names known to the informer, once Run started it
	overrides  map[string]override   // Events of writes that force drift back, by command ID, until answered
	lastRepair map[string]lastRepair // the last drift forced back, by runtime/release (repeated)
	refusals   map[string]int        // repairs the applier refused, by message ID: retried under a new one
	parked     *bus.ParkedState      // the parked stream as last read (nil: not yet)

	drift *appDrift // the level-triggered drift loop; nil without Config.Applications
}

type resolution struct {
	key    string
	plan   *plan.Plan
	reason string
	msg    string
	// retryAt, for a failed pull of an OCI bundle, is when it is pulled again.
	retryAt time.Time
}

// BundlePuller pulls the bundle document spec.bundle.oci names (planner/internal/ocibundle). A
// failure is a *plan.Error: its reason and message go to Resolved.
type BundlePuller interface {
	Pull(ctx context.Context, src *v1alpha1.OCIBundleSource) ([]byte, error)
}

// New returns a controller. Call Run to start its informers and workers, and hand Routes to
// the bus dispatcher.
func New(cfg Config, store Store, pub Publisher) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.Resync == 0 {
		cfg.Resync = 10 * time.Minute
	}
	if cfg.DriftResync <= 0 {
		cfg.DriftResync = DefaultDriftResync
	}
	if cfg.ParkedPoll <= 0 {
		cfg.ParkedPoll = ParkedPoll
	}
	if cfg.Recorder == nil {
		cfg.Recorder = discard{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name, Clock: cfg.Clock},
	)
	cs := newCachedStore(store)
	runtimes := cs.cachedRuntimes
	cfg.Metrics.runtimes.Store(&runtimes)
	var drift *appDrift
	if cfg.Applications != nil {
		drift = newAppDrift(cfg.Applications, cfg.Clock.Now())
	}
	return &Controller{
		cfg: cfg, store: newStepStore(cs, cfg.Namespace), cache: cs, pub: pub, queue: q, drift: drift, overrides: map[string]override{}, lastRepair: map[string]lastRepair{}, refusals: map[string]int{},
		plans: plan.NewCache(func(ctx context.Context, name string) (*corev1.ConfigMap, error) {
			return cs.GetConfigMap(ctx, cfg.Namespace, name)
		}, plan.DefaultCacheSize),
		resolved: map[string]resolution{}, published: map[string]bool{},
		names: func() []string { return []string{v1alpha1.RuntimeName} },
	}
}

// Routes are the planner's bus handlers.
func (c *Controller) Routes() dispatch.Routes {
	return dispatch.Routes{
		bus.TypeReleaseVerdict:    c.handleVerdict,
		bus.TypeApplyResult:       c.handleResult,
		bus.TypeDriftReport:       c.handleDrift,
		bus.TypeEngineStatus:      c.handleEngine,
		bus.TypeCredentialsStatus: c.handleCredentials,
	}
}

// Run starts the informers (ClusterRuntimes, RuntimeRollouts, ConfigMaps in the operator
// namespace), waits for their caches, and reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context, kube *Kube, core kubernetes.Interface) error {
	log := logging.From(ctx)
	runtimes := cache.NewSharedIndexInformer(kube.ListWatch(resRuntimes), &v1alpha1.ClusterRuntime{}, c.cfg.Resync, cache.Indexers{})
	rollouts := cache.NewSharedIndexInformer(kube.ListWatch(resRollouts), &v1alpha1.RuntimeRollout{}, c.cfg.Resync, cache.Indexers{})
	factory := informers.NewSharedInformerFactoryWithOptions(core, c.cfg.Resync, informers.WithNamespace(c.cfg.Namespace))
	cms := factory.Core().V1().ConfigMaps().Informer()

	c.mu.Lock()
	c.names = func() []string { return runtimes.GetStore().ListKeys() }
	c.mu.Unlock()
	c.cache.attach(runtimes.GetIndexer(), rollouts.GetIndexer(), cms.GetIndexer(), c.cfg.Namespace, func() bool {
		return runtimes.HasSynced() && rollouts.HasSynced() && cms.HasSynced()
	})
	enqueueRuntime := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	updateRuntime := func(old, obj any) {
		if was, ok := old.(*v1alpha1.ClusterRuntime); ok {
			if rt, ok := obj.(*v1alpha1.ClusterRuntime); ok && was.Status.ActivePlan != rt.Status.ActivePlan {
				c.checkRuntime(rt.Name) // a check that found the runtime behind its rollout waits for this
			}
		}
		if !sameGeneration(old, obj) {
			enqueueRuntime(obj)
			if rt, ok := obj.(*v1alpha1.ClusterRuntime); ok {
				c.checkRuntime(rt.Name) // its spec decides what the releases must be
			}
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.AddAfter(key, StatusCoalesce)
		}
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{runtimes, cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueRuntime, UpdateFunc: updateRuntime, DeleteFunc: func(obj any) {
				c.forgetDeleted(kindRuntime, obj)
				enqueueRuntime(obj)
			},
		}},
		{rollouts, cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueueRollout, UpdateFunc: c.updateRollout, DeleteFunc: func(obj any) {
				c.forgetDeleted(kindRollout, obj)
				c.enqueueRollout(obj)
			},
		}},
		{cms, cache.ResourceEventHandlerFuncs{
			AddFunc: c.configMapChanged, UpdateFunc: func(_, o any) { c.configMapChanged(o) }, DeleteFunc: c.enqueueConfigMap,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	for _, inf := range []cache.SharedIndexInformer{runtimes, rollouts, cms} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	if !cache.WaitForCacheSync(ctx.Done(), runtimes.HasSynced, rollouts.HasSynced, cms.HasSynced) {
		return nil // stopped before the caches synced
	}
	log.Info().Msg("caches synced")
	if c.drift != nil {
		if err := c.runDrift(ctx, &wg); err != nil {
			return err
		}
	}
	if c.cfg.Parked != nil {
		wg.Add(1)
		go func() { defer wg.Done(); c.watchParked(ctx) }()
	}
	for range c.cfg.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); c.work(ctx) }()
	}
	<-ctx.Done()
	return nil
}

// StatusCoalesce is how long the reconcile of a runtime waits after a status-only change (the
// planner's own status writes, a verdict or a result it recorded). That reconcile decides
// nothing the change needs: the handler of a verdict or result already advanced the rollout,
// and the verdict or result that ends it queues the runtime at once. What it does is refresh
// the runtime's status (the rollout's progress, its conditions), each time a status write and
// time under the runtime's lock, in the way of the next verdict. So a rollout refreshes the
// runtime about once a second however fast its steps go, instead of once per step.
// Spec, generation and deletion changes are reconciled at once.
const StatusCoalesce = time.Second

// sameGeneration reports whether an update left generation and deletion alone: a status or
// metadata write.
func sameGeneration(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	return ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && (o.GetDeletionTimestamp() == nil) == (n.GetDeletionTimestamp() == nil)
}

func (c *Controller) updateRollout(old, obj any) {
	if o, ok := old.(*v1alpha1.RuntimeRollout); ok {
		if r, ok := obj.(*v1alpha1.RuntimeRollout); ok && r.Spec.Runtime != "" {
			// What a release must be changes when its step or the rollout ends.
			releases, ended := stepEnds(o, r)
			if ended {
				c.checkRuntime(r.Spec.Runtime)
			}
			for _, rel := range releases {
				c.checkRelease(r.Spec.Runtime, rel)
			}
		}
	}
	if !sameGeneration(old, obj) {
		c.enqueueRollout(obj)
		return
	}
	if r, ok := obj.(*v1alpha1.RuntimeRollout); ok && r.Spec.Runtime != "" {
		c.queue.AddAfter(r.Spec.Runtime, StatusCoalesce)
	}
}

// forgetDeleted drops the planner's written copy of an object the informer saw deleted.
func (c *Controller) forgetDeleted(kind string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		c.cache.forget(kind, o.GetName(), o.GetUID())
	}
}

func (c *Controller) enqueueRollout(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if r, ok := obj.(*v1alpha1.RuntimeRollout); ok && r.Spec.Runtime != "" {
		c.queue.Add(r.Spec.Runtime)
	}
}

// configMapChanged reacts to a ConfigMap of the operator namespace created or changed, except
// the planner's own writes (ownRecord): those are not news to it.
func (c *Controller) configMapChanged(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && c.ownRecord(cm) {
		return
	}
	c.enqueueConfigMap(obj)
}

// ownRecord reports whether a ConfigMap created or changed is one whose appearance decides
// nothing: a rollout's steps ConfigMap (immutable, created by a planner just before the
// rollout write that relies on it, whose own event queues the runtime), or a plan this planner
// already holds (it stored or read that plan; a plan it does not hold, one restored after it
// was lost, still queues every runtime). Reacting to them ran a whole reconcile for each, five
// per 30-step rollout, each a status write of the runtime under the runtime's lock that the
// next verdict waited for. Their deletion is still news (enqueueConfigMap).
func (c *Controller) ownRecord(cm *corev1.ConfigMap) bool {
	switch cm.Labels[v1alpha1.LabelRole] {
	case v1alpha1.StepsRoleValue:
		return true
	case v1alpha1.PlanRoleValue:
		digest := cm.Annotations[v1alpha1.AnnotationPlanDigest]
		if digest == "" {
			return false
		}
		_, held := c.plans.Cached(digest)
		return held
	}
	return false
}

// enqueueConfigMap reacts to plan and bundle ConfigMaps in the operator namespace: a bundle
// edit or a lost plan concerns every runtime (there is one, named cluster).
func (c *Controller) enqueueConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if _, ok := obj.(*corev1.ConfigMap); ok {
		c.enqueueAll()
	}
}

// enqueueAll queues every runtime the informer knows; none before Run started it (the bus
// dispatcher may deliver news first: the informer's initial list queues every runtime then).
func (c *Controller) enqueueAll() {
	c.mu.Lock()
	names := c.names
	c.mu.Unlock()
	if names == nil {
		return
	}
	for _, n := range names() {
		c.queue.Add(n)
	}
}

func (c *Controller) work(ctx context.Context) {
	for {
		name, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		err := c.Sync(ctx, name)
		switch {
		case err == nil:
			c.queue.Forget(name)
		case ctx.Err() != nil:
		default:
			logging.From(ctx).Warn().Err(err).Str(logging.KeyRuntime, name).Msg("reconcile runtime, will retry")
			c.queue.AddRateLimited(name)
		}
		c.queue.Done(name)
	}
}

// retryConflict runs fn until it does not return a conflict (at most 10 times).
func retryConflict(fn func() error) error {
	var err error
	for range 10 {
		if err = fn(); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}
