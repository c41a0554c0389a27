package runtimeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// request is what the test server saw of one request.
type request struct {
	method, path, query, contentType, body string
}

// serve returns a client of a server answering every request with handler, and the requests
// it saw, for the test's length.
func serve(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) (*Client, <-chan request) {
	t.Helper()
	seen := make(chan request, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(body)}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}

func rolloutJSON(name, rv string, phase v1alpha1.RolloutPhase) string {
	return fmt.Sprintf(`{"apiVersion":"operator.aicr.run/v1alpha1","kind":"RuntimeRollout",`+
		`"metadata":{"name":%q,"resourceVersion":%q},"spec":{"runtime":"cluster"},"status":{"phase":%q}}`, name, rv, phase)
}

// TestPatchSendsThePatchAndDecodesTheAnswer proves Patch sends the patch as its type says, to the
// object (or its subresource), and returns the object the API server answered with, typed.
func TestPatchSendsThePatchAndDecodesTheAnswer(t *testing.T) {
	t.Parallel()
	c, seen := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, rolloutJSON("r-1", "8", v1alpha1.PhaseAwaitingApproval))
	})
	patch := `{"metadata":{"resourceVersion":"7"},"spec":{"approval":{"approvedBy":"alice"}}}`
	for _, tc := range []struct {
		sub      []string
		wantPath string
	}{
		{nil, "/apis/operator.aicr.run/v1alpha1/runtimerollouts/r-1"},
		{[]string{"status"}, "/apis/operator.aicr.run/v1alpha1/runtimerollouts/r-1/status"},
	} {
		ro, err := c.Rollouts().Patch(context.Background(), "r-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "test"}, tc.sub...)
		if err != nil {
			t.Fatalf("Patch %v: %v", tc.sub, err)
		}
		if ro.Name != "r-1" || ro.ResourceVersion != "8" || ro.Status.Phase != v1alpha1.PhaseAwaitingApproval || ro.Spec.Runtime != v1alpha1.RuntimeName {
			t.Errorf("Patch %v returned %+v", tc.sub, ro)
		}
		got := <-seen
		want := request{http.MethodPatch, tc.wantPath, "fieldManager=test", string(types.MergePatchType), patch}
		if got != want {
			t.Errorf("Patch %v sent %+v, want %+v", tc.sub, got, want)
		}
	}
}

// TestPatchReturnsTheAPIError proves a refused patch is the API server's status error, for
// apierrors' predicates (a resourceVersion conflict).
func TestPatchReturnsTheAPIError(t *testing.T) {
	t.Parallel()
	c, _ := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: http.StatusConflict, Message: "the object has been modified"})
	})
	_, err := c.Runtimes().Patch(context.Background(), "cluster", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("Patch answered 409: error %v, want the Conflict status", err)
	}
}

// TestWatchDecodesTypedEvents proves Watch opens a watch with the options given and hands each
// event's object typed.
func TestWatchDecodesTypedEvents(t *testing.T) {
	t.Parallel()
	c, seen := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
			fmt.Fprintf(w, `{"type":%q,"object":%s}`+"\n", typ, rolloutJSON("r-1", fmt.Sprint(10+i), v1alpha1.PhaseProgressing))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.Rollouts().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=r-1", ResourceVersion: "9"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for e := range w.ResultChan() {
		ro, ok := e.Object.(*v1alpha1.RuntimeRollout)
		if !ok {
			t.Fatalf("event %s carries %T, want *v1alpha1.RuntimeRollout", e.Type, e.Object)
		}
		got = append(got, fmt.Sprintf("%s %s@%s %s", e.Type, ro.Name, ro.ResourceVersion, ro.Status.Phase))
	}
	want := []string{"ADDED r-1@10 Progressing", "MODIFIED r-1@11 Progressing", "DELETED r-1@12 Progressing"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
	req := <-seen
	if req.method != http.MethodGet || req.path != "/apis/operator.aicr.run/v1alpha1/runtimerollouts" ||
		req.query != "fieldSelector=metadata.name%3Dr-1&resourceVersion=9&watch=true" {
		t.Errorf("Watch sent %+v", req)
	}
}

// TestListWatchFollowsTheSelectedObjects proves an informer on ListWatch lists and then watches
// with the field selector, and holds the objects typed.
func TestListWatchFollowsTheSelectedObjects(t *testing.T) {
	t.Parallel()
	c, seen := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", rolloutJSON("r-1", "6", v1alpha1.PhaseSucceeded))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, `{"apiVersion":"operator.aicr.run/v1alpha1","kind":"RuntimeRolloutList","metadata":{"resourceVersion":"5"},"items":[%s]}`,
			rolloutJSON("r-1", "5", v1alpha1.PhaseProgressing))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inf := cache.NewSharedIndexInformer(c.Rollouts().ListWatch("metadata.name=r-1"), &v1alpha1.RuntimeRollout{}, 0, cache.Indexers{})
	phases := make(chan v1alpha1.RolloutPhase, 4)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { phases <- o.(*v1alpha1.RuntimeRollout).Status.Phase },
		UpdateFunc: func(_, o any) { phases <- o.(*v1alpha1.RuntimeRollout).Status.Phase },
	}); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	for _, want := range []v1alpha1.RolloutPhase{v1alpha1.PhaseProgressing, v1alpha1.PhaseSucceeded} {
		select {
		case got := <-phases:
			if got != want {
				t.Fatalf("informer saw phase %s, want %s", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("informer never saw phase %s", want)
		}
	}
	for _, wantWatch := range []bool{false, true} {
		req := <-seen
		if got := req.query; !strings.Contains(got, "fieldSelector=metadata.name%3Dr-1") || strings.Contains(got, "watch=true") != wantWatch {
			t.Errorf("informer request %q: want the field selector, watch=%v", got, wantWatch)
		}
	}
}
