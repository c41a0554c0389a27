//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-cd/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/argo-cd/gitops-engine/pkg/sync/common"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argoinformers "github.com/argoproj/argo-cd/v3/pkg/client/informers/externalversions"
	argolisters "github.com/argoproj/argo-cd/v3/pkg/client/listers/application/v1alpha1"
	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// fakeArgoCD plays Argo CD v3.4.2's application controller for the operator's Applications: as
// soon as a step's write is visible it writes, in one plain update of the Application (the CRD
// has no status subresource), the status Argo CD records after a successful sync (the recorded
// fixture 01b-create-clean in e2e/contract/testdata/argocd-v3.4.2): comparedTo = spec, Synced
// at the digest, Healthy, operationState Succeeded with syncResult = spec, .operation absent;
// for an unchanged step it also removes the refresh annotation, as Argo CD does when it
// compares.
//
// It records when each step's Application was first seen (seen) and when its ready status was
// written (ready), so the step advance latency is ready[n] -> seen[n+1].
type fakeArgoCD struct {
	h      *harness
	lister argolisters.ApplicationNamespaceLister
	queue  workqueue.TypedRateLimitingInterface[string]

	mu    sync.Mutex
	seen  map[string]time.Time // step ID -> first time an Application carried it
	ready map[string]time.Time // step ID -> when the ready status write returned
	done  map[string]string    // Application -> step made ready
	// The bus hops in between, from copies of the messages (core NATS subscriptions).
	verdict map[string]time.Time // step ID -> first Ready verdict received
	command map[string]time.Time // step ID -> first apply command received
}

const fakeArgoWorkers = 4

// runFakeArgoCD starts the fake controller; it stops when ctx ends.
func runFakeArgoCD(ctx context.Context, h *harness) (*fakeArgoCD, error) {
	f := &fakeArgoCD{h: h, seen: map[string]time.Time{}, ready: map[string]time.Time{}, done: map[string]string{},
		verdict: map[string]time.Time{}, command: map[string]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	record := func(into map[string]time.Time, step string) {
		now := time.Now()
		f.mu.Lock()
		if _, ok := into[step]; !ok {
			into[step] = now
		}
		f.mu.Unlock()
	}
	vsub, err := h.nc.Subscribe(bus.Prefix+".evt.release."+v1alpha1.RuntimeName+".*", func(m *nats.Msg) {
		var v bus.ReleaseVerdict
		if json.Unmarshal(m.Data, &v) == nil && v.Ready {
			record(f.verdict, v.StepID)
		}
	})
	if err != nil {
		return nil, err
	}
	csub, err := h.nc.Subscribe(bus.Prefix+".cmd.apply."+v1alpha1.RuntimeName+".*", func(m *nats.Msg) {
		var c bus.ApplyCommand
		if json.Unmarshal(m.Data, &c) == nil {
			record(f.command, c.Step.ID)
		}
	})
	if err != nil {
		return nil, err
	}
	go func() { <-ctx.Done(); _ = vsub.Unsubscribe(); _ = csub.Unsubscribe() }()
	factory := argoinformers.NewSharedInformerFactoryWithOptions(h.argo, 0, argoinformers.WithNamespace(engineNamespace))
	inf := factory.Argoproj().V1alpha1().Applications()
	f.lister = inf.Lister().Applications(engineNamespace)
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.observe(o) },
		UpdateFunc: func(_, o any) { f.observe(o) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("fake argo cd: %v cache did not sync", typ)
		}
	}
	for range fakeArgoWorkers {
		go func() {
			for f.work(ctx) {
			}
		}()
	}
	go func() { <-ctx.Done(); f.queue.ShutDown(); factory.Shutdown() }()
	return f, nil
}

func (f *fakeArgoCD) observe(o any) {
	app, ok := o.(*argov1alpha1.Application)
	if !ok {
		return
	}
	now := time.Now()
	if step := app.Annotations[v1alpha1.AnnotationStep]; step != "" {
		f.mu.Lock()
		if _, ok := f.seen[step]; !ok {
			f.seen[step] = now
		}
		f.mu.Unlock()
	}
	if f.needsStatus(app) {
		f.queue.Add(app.Name)
	}
}

// needsStatus reports whether Argo CD would now record a sync of the step's spec.
func (f *fakeArgoCD) needsStatus(app *argov1alpha1.Application) bool {
	step := app.Annotations[v1alpha1.AnnotationStep]
	if step == "" || app.DeletionTimestamp != nil || app.Annotations[v1alpha1.AnnotationDeleteRollout] != "" || app.Spec.Source == nil {
		return false
	}
	if app.Labels[v1alpha1.LabelRuntime] != v1alpha1.RuntimeName {
		return false // the applier and readiness benchmarks' Applications stay unsynced
	}
	f.mu.Lock()
	done := f.done[app.Name] == step
	f.mu.Unlock()
	if done {
		return false
	}
	if app.Annotations[v1alpha1.AnnotationReadinessGate] == "true" && app.Operation == nil {
		return false // the applier's explicit sync follows the write
	}
	// Every step's write ends with its refresh request, which Argo CD answers with the status.
	return app.Annotations[v1alpha1.AnnotationRefreshFor] == v1alpha1.AnnotatedStepToken(app.Annotations) && app.Annotations[v1alpha1.AnnotationArgoRefresh] != ""
}

func (f *fakeArgoCD) work(ctx context.Context) bool {
	name, shutdown := f.queue.Get()
	if shutdown {
		return false
	}
	defer f.queue.Done(name)
	if err := f.sync(ctx, name); err != nil {
		f.queue.AddRateLimited(name)
		return true
	}
	f.queue.Forget(name)
	return true
}

// sync writes the ready status of the Application's current step.
func (f *fakeArgoCD) sync(ctx context.Context, name string) error {
	cached, err := f.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !f.needsStatus(cached) {
		return nil
	}
	app := cached.DeepCopy()
	step := app.Annotations[v1alpha1.AnnotationStep]
	syncedStatus(app)
	_, err = f.h.argo.ArgoprojV1alpha1().Applications(engineNamespace).Update(ctx, app, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// the cache is behind (the applier's refresh patch, say): its update event queues it again
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now()
	f.mu.Lock()
	f.done[name] = step
	if _, ok := f.ready[step]; !ok {
		f.ready[step] = now
	}
	f.mu.Unlock()
	return nil
}

// syncedStatus turns app into what Argo CD v3.4.2 stores after a successful sync of its spec.
func syncedStatus(app *argov1alpha1.Application) {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second)) // Argo CD's timestamps have 1 s precision
	src := *app.Spec.Source.DeepCopy()
	op := argov1alpha1.Operation{
		InitiatedBy: argov1alpha1.OperationInitiator{Automated: true},
		Sync: &argov1alpha1.SyncOperation{Revision: src.TargetRevision, Source: src.DeepCopy(), Prune: true,
			SyncOptions: app.Spec.SyncPolicy.SyncOptions},
	}
	if app.Spec.SyncPolicy != nil && app.Spec.SyncPolicy.Retry != nil {
		op.Retry = *app.Spec.SyncPolicy.Retry.DeepCopy()
	}
	if app.Operation != nil {
		op = *app.Operation.DeepCopy() // an explicit sync: Argo CD runs the operation it was given
	}
	ns := app.Spec.Destination.Namespace
	resources := []argov1alpha1.ResourceStatus{
		{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: app.Name + "-config", Status: argov1alpha1.SyncStatusCodeSynced},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: app.Name + "-web", Status: argov1alpha1.SyncStatusCodeSynced},
	}
	var results argov1alpha1.ResourceResults
	for _, r := range resources {
		results = append(results, &argov1alpha1.ResourceResult{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
			Status: synccommon.ResultCodeSynced, Message: strings.ToLower(r.Kind) + "/" + r.Name + " serverside-applied",
			HookPhase: synccommon.OperationSucceeded, SyncPhase: synccommon.SyncPhaseSync})
	}
	history := app.Status.History
	var id int64
	if len(history) > 0 {
		id = history[len(history)-1].ID + 1
	}
	history = append(history, argov1alpha1.RevisionHistory{ID: id, Revision: src.TargetRevision, Source: *src.DeepCopy(),
		DeployedAt: now, DeployStartedAt: &now, InitiatedBy: op.InitiatedBy})
	if len(history) > 3 {
		history = history[len(history)-3:]
	}
	app.Status = argov1alpha1.ApplicationStatus{
		Resources: resources,
		Sync: argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced, Revision: src.TargetRevision,
			ComparedTo: argov1alpha1.ComparedTo{Source: *src.DeepCopy(), Destination: app.Spec.Destination, IgnoreDifferences: app.Spec.IgnoreDifferences}},
		Health:               argov1alpha1.AppHealthStatus{Status: health.HealthStatusHealthy, LastTransitionTime: &now},
		History:              history,
		ReconciledAt:         &now,
		ResourceHealthSource: argov1alpha1.ResourceHealthLocationAppTree,
		SourceType:           argov1alpha1.ApplicationSourceTypeHelm,
		ControllerNamespace:  engineNamespace,
		OperationState: &argov1alpha1.OperationState{
			Operation:  op,
			Phase:      synccommon.OperationSucceeded,
			Message:    "successfully synced (no more tasks)",
			SyncResult: &argov1alpha1.SyncOperationResult{Resources: results, Revision: src.TargetRevision, Source: *src.DeepCopy()},
			StartedAt:  now,
			FinishedAt: &now,
		},
	}
	app.Operation = nil
	delete(app.Annotations, v1alpha1.AnnotationArgoRefresh)
}

// advance is one measured step advance and its hops.
type advance struct {
	total     time.Duration // ready status written -> next Application seen
	readiness time.Duration // ready status written -> Ready verdict on NATS
	planner   time.Duration // verdict -> next command on NATS
	applier   time.Duration // command -> next Application seen
}

// advances returns, for the rollout's steps 1..n-1, the time from step i's ready status write
// to step i+1's Application first seen, with its hops.
func (f *fakeArgoCD) advances(rollout string, steps int) ([]advance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []advance
	for i := 1; i < steps; i++ {
		this, next := rollout+"/"+strconv.Itoa(i), rollout+"/"+strconv.Itoa(i+1)
		r, ok1 := f.ready[this]
		s, ok2 := f.seen[next]
		v, ok3 := f.verdict[this]
		c, ok4 := f.command[next]
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, fmt.Errorf("step %d of %s: ready written %t, verdict %t, next command %t, next Application seen %t", i, rollout, ok1, ok3, ok4, ok2)
		}
		out = append(out, advance{total: s.Sub(r), readiness: v.Sub(r), planner: c.Sub(v), applier: s.Sub(c)})
	}
	return out, nil
}

// syncTime is the fake Argo CD's own share of the rollout's steps 1..n: for each, from its
// Application first seen by the fake's watch to the fake's ready status write returned. With
// a real Argo CD that span is Argo CD's pick-up and sync, not the operator's.
func (f *fakeArgoCD) syncTime(rollout string, steps int) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sum time.Duration
	for i := 1; i <= steps; i++ {
		step := v1alpha1.StepID(rollout, int32(i))
		s, ok1 := f.seen[step]
		r, ok2 := f.ready[step]
		if !ok1 || !ok2 {
			return 0, fmt.Errorf("step %d of %s: Application seen %t, ready written %t", i, rollout, ok1, ok2)
		}
		sum += r.Sub(s)
	}
	return sum, nil
}
