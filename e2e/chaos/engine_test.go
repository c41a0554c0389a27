//go:build chaos || e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

const (
	// engineFieldManager is the field manager of the fake controller's writes, as Argo CD's.
	engineFieldManager = "argocd-application-controller"
	// watchWindow ends each watch so that failed writes are retried (admission or the apiserver
	// down) without waiting for another event.
	watchWindow = 2
	// retryBackoff separates attempts to reach an apiserver that is down.
	retryBackoff = 200 * time.Millisecond
)

// engine plays Argo CD v3.4.2's application controller on the rules a readiness judge can rely
// on, as the recorded Argo CD fixtures showed them (readiness/internal/fences/testdata/README.md,
// "Rules a readiness judge ... can rely on"): once a spec is written it shows it compared
// (comparedTo = spec), Synced at the digest and Healthy, with an automated sync's
// operationState (Succeeded, syncResult = spec); it answers a refresh request by removing the
// annotation in the same write; it runs an operation written to .operation (recording it in
// operationState and clearing .operation). A readiness gate's chart holds only hooks, so its
// changes are never auto-synced: only an explicit operation syncs it (rule 5).
type engine struct {
	res dynamic.ResourceInterface

	items map[string]*unstructured.Unstructured
	retry map[string]bool
	// Writes and relists, for the report.
	writes, relists int
}

func newEngine(s *stack.Stack) (*engine, error) {
	// A client of its own: its retries must not spend the test's client-side rate limit.
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(s.Env.Config))
	if err != nil {
		return nil, fmt.Errorf("engine client: %w", err)
	}
	return &engine{
		res:   dyn.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace),
		items: map[string]*unstructured.Unstructured{}, retry: map[string]bool{},
	}, nil
}

// run watches Applications until ctx ends, resuming from the last resourceVersion it saw; it
// lists again when the apiserver says that version is gone (after a restart).
func (e *engine) run(ctx context.Context) {
	lastRV := ""
	for ctx.Err() == nil {
		if lastRV == "" {
			list, err := e.res.List(ctx, metav1.ListOptions{})
			if err != nil {
				pause(ctx, retryBackoff)
				continue
			}
			e.relists++
			e.items = map[string]*unstructured.Unstructured{}
			for i := range list.Items {
				u := &list.Items[i]
				e.items[u.GetName()] = u
				e.reconcile(ctx, u)
			}
			lastRV = list.GetResourceVersion()
		}
		timeout := int64(watchWindow)
		w, err := e.res.Watch(ctx, metav1.ListOptions{ResourceVersion: lastRV, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
		if err != nil {
			lastRV = ""
			pause(ctx, retryBackoff)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				// The dynamic client decodes the Status as Unstructured; whatever it says
				// (410 Gone after an apiserver restart, a watch cache still starting), list
				// again after a pause rather than asking for the same version in a loop.
				lastRV = ""
				pause(ctx, retryBackoff)
				break
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			lastRV = u.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(e.items, u.GetName())
				continue
			}
			e.items[u.GetName()] = u
			e.reconcile(ctx, u)
		}
		w.Stop()
		for name := range e.retry {
			if u, ok := e.items[name]; ok {
				e.reconcile(ctx, u)
			}
		}
	}
}

// reconcile writes the status Argo CD would show for u, if it differs; for an Application being
// deleted it plays the resources finalizer: the release's resources are gone at once.
func (e *engine) reconcile(ctx context.Context, u *unstructured.Unstructured) {
	patch := desiredPatch(u, time.Now().UTC())
	if u.GetDeletionTimestamp() != nil {
		patch = finalizerPatch(u)
	}
	if patch == nil {
		delete(e.retry, u.GetName())
		return
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		panic(err) // maps of JSON values
	}
	_, err = e.res.Patch(ctx, u.GetName(), types.JSONPatchType, raw, metav1.PatchOptions{FieldManager: engineFieldManager})
	switch {
	case err == nil:
		e.writes++
		delete(e.retry, u.GetName())
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		delete(e.retry, u.GetName()) // a newer version is on its way
	default:
		e.retry[u.GetName()] = true // admission or the apiserver is down: the next window retries
	}
}

// desiredPatch returns the JSON patch that turns u's status into what Argo CD shows for u's
// spec, or nil when it already does. The patch carries u's resourceVersion: it applies only to
// the version it was computed from.
func desiredPatch(u *unstructured.Unstructured, now time.Time) []map[string]any {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	src, _, _ := unstructured.NestedMap(spec, "source")
	dest, _, _ := unstructured.NestedMap(spec, "destination")
	ignore, _, _ := unstructured.NestedSlice(spec, "ignoreDifferences")
	rev, _, _ := unstructured.NestedString(src, "targetRevision")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	op, hasOp, _ := unstructured.NestedMap(u.Object, "operation")
	_, refresh := u.GetAnnotations()[v1alpha1.AnnotationArgoRefresh]
	gate := u.GetAnnotations()[v1alpha1.AnnotationReadinessGate] == "true"

	cmpSrc, _, _ := unstructured.NestedMap(status, "sync", "comparedTo", "source")
	cmpDest, _, _ := unstructured.NestedMap(status, "sync", "comparedTo", "destination")
	cmpIgnore, _, _ := unstructured.NestedSlice(status, "sync", "comparedTo", "ignoreDifferences")
	syncStatus, _, _ := unstructured.NestedString(status, "sync", "status")
	syncRev, _, _ := unstructured.NestedString(status, "sync", "revision")
	health, _, _ := unstructured.NestedString(status, "health", "status")
	resSrc, _, _ := unstructured.NestedMap(status, "operationState", "syncResult", "source")
	resRev, _, _ := unstructured.NestedString(status, "operationState", "syncResult", "revision")
	compared := equality.Semantic.DeepEqual(cmpSrc, src) && equality.Semantic.DeepEqual(cmpDest, dest) && equality.Semantic.DeepEqual(cmpIgnore, ignore)
	autoSync := !gate && (!equality.Semantic.DeepEqual(resSrc, src) || resRev != rev)
	if !hasOp && !refresh && !autoSync && compared && syncStatus == "Synced" && syncRev == rev && health == "Healthy" {
		return nil
	}

	ts := now.Format(time.RFC3339)
	next := runtime.DeepCopyJSON(status)
	comparedTo := map[string]any{"source": runtime.DeepCopyJSONValue(src), "destination": runtime.DeepCopyJSONValue(dest)}
	if ignore != nil {
		comparedTo["ignoreDifferences"] = runtime.DeepCopyJSONValue(ignore) // as Argo CD copies them in
	}
	next["sync"] = map[string]any{"status": "Synced", "revision": rev, "comparedTo": comparedTo}
	if health != "Healthy" {
		next["health"] = map[string]any{"status": "Healthy", "lastTransitionTime": ts}
	}
	next["reconciledAt"] = ts
	next["sourceType"] = "Helm"
	next["controllerNamespace"] = stack.EngineNamespace
	delete(next, "conditions")
	result := map[string]any{"revision": rev, "source": runtime.DeepCopyJSONValue(src)}
	switch {
	case hasOp:
		next["operationState"] = map[string]any{"operation": runtime.DeepCopyJSONValue(op), "phase": "Succeeded",
			"message": "successfully synced (all tasks run)", "syncResult": result, "startedAt": ts, "finishedAt": ts}
	case autoSync:
		syncOptions, _, _ := unstructured.NestedSlice(spec, "syncPolicy", "syncOptions")
		sync := map[string]any{"revision": rev, "prune": true}
		if syncOptions != nil {
			sync["syncOptions"] = syncOptions
		}
		auto := map[string]any{"sync": sync, "initiatedBy": map[string]any{"automated": true}}
		if retry, ok, _ := unstructured.NestedMap(spec, "syncPolicy", "retry"); ok {
			auto["retry"] = retry
		}
		next["operationState"] = map[string]any{"operation": auto, "phase": "Succeeded",
			"message": "successfully synced (all tasks run)", "syncResult": result, "startedAt": ts, "finishedAt": ts}
	}
	patch := []map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": u.GetResourceVersion()},
		{"op": "add", "path": "/status", "value": next},
	}
	if hasOp {
		patch = append(patch, map[string]any{"op": "remove", "path": "/operation"})
	}
	if refresh {
		patch = append(patch, map[string]any{"op": "remove", "path": "/metadata/annotations/" + strings.ReplaceAll(v1alpha1.AnnotationArgoRefresh, "/", "~1")})
	}
	return patch
}

// finalizerPatch removes Argo CD's resources finalizer from an Application being deleted, as
// the application controller does once it deleted the release's resources; nil when there is
// none to remove.
func finalizerPatch(u *unstructured.Unstructured) []map[string]any {
	i := slices.Index(u.GetFinalizers(), v1alpha1.ArgoResourcesFinalizer)
	if i < 0 {
		return nil
	}
	return []map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": u.GetResourceVersion()},
		{"op": "remove", "path": fmt.Sprintf("/metadata/finalizers/%d", i)},
	}
}

// background runs fn in a goroutine until the returned stop is called; stop cancels fn's
// context, waits for it to return, and does nothing the second time.
func background(fn func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fn(ctx) }()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
