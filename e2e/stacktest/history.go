package stacktest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// History records every version of the objects a watch sees, with the resourceVersion each
// was stored at. On the local stack resourceVersions are etcd revisions, one sequence across
// every resource, so comparing them orders writes to different objects: what a
// second-precision timestamp cannot.
type History struct {
	s      *stack.Stack
	ri     dynamic.ResourceInterface
	mu     sync.Mutex
	events []Recorded
	err    error
}

// Recorded is one version of an object.
type Recorded struct {
	Type   watch.EventType // "LIST" for the state found when the watch began
	RV     uint64
	Object *unstructured.Unstructured
}

// Record watches gvr (in namespace, "" for cluster-scoped) from now until the test ends.
func Record(t *testing.T, s *stack.Stack, gvr schema.GroupVersionResource, namespace string) *History {
	t.Helper()
	var ri dynamic.ResourceInterface = s.Dynamic.Resource(gvr)
	if namespace != "" {
		ri = s.Dynamic.Resource(gvr).Namespace(namespace)
	}
	list, err := ri.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s: %v", gvr.Resource, err)
	}
	h := &History{s: s, ri: ri}
	for i := range list.Items {
		h.add("LIST", &list.Items[i])
	}
	rv := list.GetResourceVersion()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(200 * time.Millisecond): // retry delay of a failed watch call
				}
				continue
			}
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if ev.Type == watch.Error || !ok {
					h.fail(fmt.Errorf("watch %s: %v", gvr.Resource, apierrors.FromObject(ev.Object)))
					w.Stop()
					return
				}
				rv = u.GetResourceVersion()
				h.add(ev.Type, u)
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *History) add(typ watch.EventType, u *unstructured.Unstructured) {
	rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.err = fmt.Errorf("resourceVersion %q of %s is not an etcd revision: %w", u.GetResourceVersion(), u.GetName(), err)
		return
	}
	h.events = append(h.events, Recorded{Type: typ, RV: rv, Object: u.DeepCopy()})
}

func (h *History) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

// catchUpTimeout bounds the wait for the watch to deliver a version the API server already
// returned to a read.
const catchUpTimeout = 30 * time.Second

// Of returns the recorded versions of the named object, oldest first, up to at least the
// version a read returns now: a watch event may trail a read (reads go to etcd, watch events
// through the watch cache), and the version the test just waited for must be among them.
func (h *History) Of(t *testing.T, name string) []Recorded {
	t.Helper()
	h.catchUp(t, name)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		t.Fatal(h.err)
	}
	var out []Recorded
	for _, e := range h.events {
		if e.Object.GetName() == name {
			out = append(out, e)
		}
	}
	return out
}

// catchUp waits until the history holds the named object's current version (nothing when the
// object is gone).
func (h *History) catchUp(t *testing.T, name string) {
	t.Helper()
	cur, err := h.ri.Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	want, err := strconv.ParseUint(cur.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s is not an etcd revision", cur.GetResourceVersion(), name)
	}
	seen := func() (uint64, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		var last uint64
		for _, e := range h.events {
			if e.Object.GetName() == name {
				last = max(last, e.RV)
			}
		}
		return last, h.err
	}
	deadline := time.Now().Add(catchUpTimeout)
	for {
		last, err := seen()
		switch {
		case err != nil:
			t.Fatal(err)
		case last >= want:
			return
		case time.Now().After(deadline):
			t.Fatalf("the watch of %s delivered resourceVersion %d at most within %s, and a read returned %d", name, last, catchUpTimeout, want)
		}
		time.Sleep(20 * time.Millisecond) // poll the history the watch goroutine appends to
	}
}

// FirstApp returns the first recorded version of the Application for which match holds.
func (h *History) FirstApp(t *testing.T, name string, match func(*argoapp.Application) bool) (Recorded, *argoapp.Application, bool) {
	t.Helper()
	for _, e := range h.Of(t, name) {
		app, err := DecodeApplication(e.Object)
		if err != nil {
			t.Fatal(err)
		}
		if match(app) {
			return e, app, true
		}
	}
	return Recorded{}, nil, false
}

// FirstStep returns the first recorded version of the rollout in which its step for release
// satisfies match; a match already in the state found when the watch began does not count,
// because its resourceVersion is not the one the step changed at. Failing, it lists the step's
// state in every recorded version.
func (h *History) FirstStep(t *testing.T, rolloutName, release string, match func(v1alpha1.Step) bool) (Recorded, v1alpha1.Step) {
	t.Helper()
	var states []string
	for _, e := range h.Of(t, rolloutName) {
		ro, err := h.s.DecodeRollout(t.Context(), e.Object)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := FindStep(ro, release)
		states = append(states, fmt.Sprintf("%s rv %d: rollout %s, step found %v, %s %s", e.Type, e.RV, ro.Status.Phase, ok, st.State, fenceStates(st.Verdict)))
		if !ok || !match(st) {
			continue
		}
		if e.Type == "LIST" {
			t.Fatalf("rollout %s: step %s already matched when the watch began", rolloutName, release)
		}
		return e, st
	}
	t.Fatalf("rollout %s: no recorded version where step %s matches; recorded:\n%s", rolloutName, release, strings.Join(states, "\n"))
	return Recorded{}, v1alpha1.Step{}
}

// fenceStates renders a verdict's fences as "[Name=State ...]".
func fenceStates(v *v1alpha1.Verdict) string {
	if v == nil {
		return "no verdict"
	}
	var out []string
	for _, f := range v.Fences {
		out = append(out, f.Name+"="+string(f.State))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// DecodeApplication decodes an Application.
func DecodeApplication(u *unstructured.Unstructured) (*argoapp.Application, error) {
	var app argoapp.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
		return nil, fmt.Errorf("decode application %s: %w", u.GetName(), err)
	}
	return &app, nil
}

// FindStep returns the rollout's step for release.
func FindStep(ro *v1alpha1.RuntimeRollout, release string) (v1alpha1.Step, bool) {
	for _, st := range ro.Status.Steps {
		if st.Release == release {
			return st, true
		}
	}
	return v1alpha1.Step{}, false
}
