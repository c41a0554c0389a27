//go:build benchargocd

package benchargocd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// seen is what the watcher saw of one Application, each time the first the watch delivered it.
type seen struct {
	created     time.Time // first event
	syncRunning time.Time // first operation state Running (or the first operation state at all, had the watch missed Running)
	ready       time.Time // first time Ready held
	history     int       // status.history entries at the last event: completed syncs
	operations  map[string]bool
}

// watcher records, for every Application in the engine namespace, when its sync started and
// when it became ready, as one informer sees them: the operator's Applications and the floor
// loop's are timed by the same clock and the same watch.
type watcher struct {
	mu   sync.Mutex
	apps map[string]*seen
	// onReady, when set, is called (without mu held) with the name of an Application that
	// just became ready: the floor loop.
	onReady func(name string)
}

func newWatcher(ctx context.Context, s *stack.Stack) (*watcher, error) {
	w := &watcher{apps: map[string]*seen{}}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.Dynamic, 0, stack.EngineNamespace, nil)
	inf := f.ForResource(testenv.ApplicationGVR).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.observe(o) },
		UpdateFunc: func(_, o any) { w.observe(o) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch applications: %v cache did not sync", typ)
		}
	}
	return w, nil
}

func (w *watcher) observe(o any) {
	now := time.Now()
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var app argoapp.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
		return
	}
	history, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	ready, _ := Ready(&app)
	w.mu.Lock()
	a := w.apps[app.Name]
	if a == nil {
		a = &seen{created: now, operations: map[string]bool{}}
		w.apps[app.Name] = a
	}
	if st := app.Status.OperationState; st != nil {
		if a.syncRunning.IsZero() {
			a.syncRunning = now
		}
		a.operations[st.StartedAt.UTC().Format(time.RFC3339)] = true
	}
	a.history = len(history)
	becameReady := ready && a.ready.IsZero()
	if becameReady {
		a.ready = now
	}
	hook := w.onReady
	w.mu.Unlock()
	if becameReady && hook != nil {
		hook(app.Name)
	}
}

// get returns a copy of what was seen of name.
func (w *watcher) get(name string) (seen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.apps[name]
	if !ok {
		return seen{}, false
	}
	return *a, true
}

// waitReady waits until every one of names was seen ready.
func (w *watcher) waitReady(ctx context.Context, timeout time.Duration, names []string) error {
	var missing string
	err := testenv.WaitFor(ctx, timeout, "applications ready", func(context.Context) (bool, error) {
		for _, n := range names {
			if a, ok := w.get(n); !ok || a.ready.IsZero() {
				missing = n
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (not ready: %s)", err, missing)
	}
	return nil
}
