package argoapp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// An Application as the API server sends it in a watch event: Argo CD's status with its copies
// of the Helm values, managed fields, integers past float64's precision, a float, nulls, and two
// fields this package's types do not declare (one a declared name in the wrong case), which
// both decoders must drop.
const eventApp = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application",
"metadata":{"name":"gpu-operator","namespace":"argocd","uid":"6f1f0c9e-2b7a-4c55-9a53-0d7c1f3e5a10",
 "resourceVersion":"4711","generation":3,"creationTimestamp":"2026-11-30T04:40:19Z",
 "labels":{"app.kubernetes.io/managed-by":"aicr-operator"},
 "annotations":{"aicr.nvidia.com/plan-digest":"sha256:4c3db97306cbd0cad510ff970663aa0aa064d31816d84d5e6397aec4fdfb3d50"},
 "managedFields":[{"manager":"aicr-applier","operation":"Apply","apiVersion":"argoproj.io/v1alpha1",
  "time":"2026-11-30T04:40:19Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:source":{"f:helm":{}}}}}]},
"spec":{"project":"default","destination":{"server":"https://kubernetes.default.svc","namespace":"gpu-operator"},
 "source":{"repoURL":"oci://127.0.0.1:25000/charts/gpu-operator","path":".","targetRevision":"v25.10.0",
  "helm":{"releaseName":"gpu-operator","valuesObject":{"driver":{"enabled":true,"version":"580.95.05","env":[]},
   "replicas":2,"ratio":0.5,"big":9007199254740993,"nested":{"a":[1,"two",null,{"x":false}]}}}},
 "syncPolicy":{"automated":{"prune":true,"selfHeal":true},"syncOptions":["ServerSideApply=true"],
  "retry":{"limit":3,"backoff":{"duration":"30s","factor":2,"maxDuration":"5m"}}},
 "Project":"wrong-case","notDeclared":{"deep":[1,2,3]}},
"status":{"sync":{"status":"Synced","revision":"v25.10.0","comparedTo":{"destination":{"server":"https://kubernetes.default.svc","namespace":"gpu-operator"},
  "source":{"repoURL":"oci://127.0.0.1:25000/charts/gpu-operator","path":".","targetRevision":"v25.10.0",
   "helm":{"releaseName":"gpu-operator","valuesObject":{"driver":{"enabled":true,"version":"580.95.05","env":[]},"replicas":2}}}}},
 "health":{"status":"Healthy","lastTransitionTime":"2026-11-30T04:41:40Z"},
 "reconciledAt":"2026-11-30T04:41:41Z",
 "conditions":[{"type":"SyncError","message":"one\nline \u00e9 \"quoted\""}],
 "resources":[{"kind":"Deployment","name":"gpu-operator","status":"Synced"}],
 "operationState":{"phase":"Succeeded","message":"successfully synced (no more tasks)",
  "startedAt":"2026-11-30T04:40:20Z","finishedAt":"2026-11-30T04:41:41Z",
  "operation":{"initiatedBy":{"automated":true},"retry":{"limit":3},"sync":{"revision":"v25.10.0","prune":true}},
  "syncResult":{"revision":"v25.10.0"}}}}`

// The same Application changed, its keys in another order, apiVersion and kind last, and again
// a declared field's name in the wrong case.
const eventAppReordered = `{"status":{"health":{"status":"Progressing"},"sync":{"revision":"v25.10.1","status":"OutOfSync"}},
"spec":{"source":{"helm":{"valuesObject":{"replicas":3}},"targetRevision":"v25.10.1","repoURL":"oci://127.0.0.1:25000/charts/gpu-operator"},
 "destination":{"namespace":"gpu-operator","server":"https://kubernetes.default.svc"},"project":"default","Project":"wrong-case"},
"metadata":{"resourceVersion":"4712","namespace":"argocd","name":"gpu-operator"},
"kind":"Application","apiVersion":"argoproj.io/v1alpha1"}`

const (
	eventBookmark = `{"kind":"Application","apiVersion":"argoproj.io/v1alpha1",
"metadata":{"resourceVersion":"4720","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},
"spec":{"destination":{},"project":""},"status":{"sync":{"comparedTo":{"source":{"repoURL":""},"destination":{}}},"health":{}}}`
	eventGone = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
"message":"too old resource version: 4700 (4711)","reason":"Expired","code":410}`
)

// stream is a watch response body: one event per line, as the API server writes them.
func stream(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(strings.ReplaceAll(e, "\n", ""))
		b.WriteString("\n")
	}
	return b.String()
}

// response is what the fake API server answers to a watch.
type response struct {
	code int
	body string
}

// watchBoth opens a watch of Applications on a server answering resp twice: through Watch (the
// one-pass decoder) and through client-go's Request.Watch on the same client, and returns both
// watches' events, or the errors they were opened with.
func watchBoth(t *testing.T, resp response) (ours, clientGo []watch.Event, oursErr, clientGoErr error) {
	t.Helper()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications" || r.URL.Query().Get("watch") != "true" {
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.code)
		_, _ = io.WriteString(w, resp.body)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := metav1.ListOptions{ResourceVersion: "4700", AllowWatchBookmarks: true}

	w, oursErr := c.Applications("argocd").Watch(ctx, opts)
	ours = drain(ctx, t, w)
	opts.Watch = true
	w, clientGoErr = c.RESTClient().Get().Namespace("argocd").Resource(ResourceApplications).
		VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	clientGo = drain(ctx, t, w)
	return ours, clientGo, oursErr, clientGoErr
}

// serve returns a client of a server answering with handler, for the test's length.
func serve(t *testing.T, handler http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain reads w's events until it closes its channel (nil for a nil watch).
func drain(ctx context.Context, t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	if w == nil {
		return nil
	}
	defer w.Stop()
	var got []watch.Event
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("the watch did not end with its stream: %d events so far", len(got))
		}
	}
}

// TestWatchDecodesEventsAsClientGo: every event of a watch stream, and the way the stream ends,
// come out of Watch exactly as out of client-go's watch on the same response.
func TestWatchDecodesEventsAsClientGo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		types []watch.EventType // the events both must give
	}{
		{
			name: "every event type, the object before or after the type, then the stream's end",
			body: stream(
				`{"type":"ADDED","object":`+eventApp+`}`,
				`{"object":`+eventAppReordered+`,"type":"MODIFIED"}`,
				`{"type":"BOOKMARK","object":`+eventBookmark+`}`,
				`{"type":"DELETED","object":`+eventAppReordered+`}`,
				`{"type":"ERROR","object":`+eventGone+`}`,
			),
			types: []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted, watch.Error},
		},
		{
			name:  "events written without newlines between them",
			body:  `{"type":"ADDED","object":` + eventAppReordered + `}{"type":"MODIFIED","object":` + eventAppReordered + "}",
			types: []watch.EventType{watch.Added, watch.Modified},
		},
		{
			name:  "an empty stream",
			body:  "",
			types: nil,
		},
		{
			name:  "a stream cut inside an event ends quietly after the whole ones",
			body:  stream(`{"type":"ADDED","object":`+eventApp+`}`) + `{"type":"MODIFIED","object":{"metadata":{"name":"gpu-`,
			types: []watch.EventType{watch.Added},
		},
		{
			name:  "an event type that does not exist",
			body:  stream(`{"type":"ADDED","object":`+eventAppReordered+`}`, `{"type":"RENAMED","object":`+eventAppReordered+`}`, `{"type":"ADDED","object":`+eventAppReordered+`}`),
			types: []watch.EventType{watch.Added, watch.Error},
		},
		{
			name:  "an object that is not an Application",
			body:  stream(`{"type":"MODIFIED","object":{"metadata":{"name":7}}}`),
			types: []watch.EventType{watch.Error},
		},
		{
			name:  "an event without its object, or with a null one",
			body:  stream(`{"type":"ADDED","object":null}`, `{"type":"ADDED"}`),
			types: []watch.EventType{watch.Error},
		},
		{
			name:  "an object without apiVersion and kind",
			body:  stream(`{"type":"ADDED","object":{"metadata":{"name":"gpu-operator"}}}`),
			types: []watch.EventType{watch.Error},
		},
		{
			name:  "a stream that is not JSON",
			body:  "<html>proxy error</html>\n",
			types: []watch.EventType{watch.Error},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, clientGo, oursErr, clientGoErr := watchBoth(t, response{code: http.StatusOK, body: tc.body})
			if oursErr != nil || clientGoErr != nil {
				t.Fatalf("opening the watch: ours %v, client-go's %v", oursErr, clientGoErr)
			}
			if got, want := eventTypes(clientGo), tc.types; !reflect.DeepEqual(got, want) {
				t.Fatalf("client-go's events %v, the case expects %v", got, want)
			}
			if got, want := eventTypes(ours), tc.types; !reflect.DeepEqual(got, want) {
				t.Fatalf("events %v, want %v (client-go's)", got, want)
			}
			for i := range ours {
				if ours[i].Type == watch.Error {
					sameErrorEvent(t, i, ours[i].Object, clientGo[i].Object)
					continue
				}
				if !reflect.DeepEqual(ours[i].Object, clientGo[i].Object) {
					t.Errorf("event %d (%s):\n got  %#v\n want %#v (client-go's)", i, ours[i].Type, ours[i].Object, clientGo[i].Object)
				}
			}
		})
	}
}

// TestWatchDecodesTheApplication checks what the equivalence cannot: that the event's object is
// the Application in the stream (client-go's decoder could drop a field just as well).
func TestWatchDecodesTheApplication(t *testing.T) {
	ours, _, err, _ := watchBoth(t, response{code: http.StatusOK, body: stream(`{"type":"ADDED","object":` + eventApp + `}`)})
	if err != nil || len(ours) != 1 {
		t.Fatalf("watch: %v, %d events", err, len(ours))
	}
	app, ok := ours[0].Object.(*Application)
	if !ok {
		t.Fatalf("object %T, want *Application", ours[0].Object)
	}
	if app.Kind != "" || app.APIVersion != "" {
		t.Errorf("apiVersion and kind %q %q, want them cleared as the REST client's decoder does", app.APIVersion, app.Kind)
	}
	if app.Name != "gpu-operator" || app.ResourceVersion != "4711" || len(app.ManagedFields) != 1 {
		t.Errorf("metadata %+v", app.ObjectMeta)
	}
	if app.Spec.Project != "default" {
		t.Errorf("spec.project %q: the wrong-case key Project must not overwrite it", app.Spec.Project)
	}
	values := string(app.Spec.Source.Helm.ValuesObject.Raw)
	if !strings.Contains(values, `"big":9007199254740993`) || !strings.Contains(values, `"nested":{"a":[1,"two",null,{"x":false}]}`) {
		t.Errorf("values %s, want the stream's bytes", values)
	}
	if app.Status.OperationState == nil || app.Status.OperationState.Phase != "Succeeded" ||
		app.Status.Conditions[0].Message != "one\nline é \"quoted\"" || app.Status.Health.LastTransitionTime == nil {
		t.Errorf("status %+v", app.Status)
	}
}

// TestWatchOpensAsClientGo: an error answer to the watch request is the same API error from
// both, and a server that closes the connection before answering gives an empty watch (the
// reflector watches again from where it was) from both.
func TestWatchOpensAsClientGo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resp   response
		reason metav1.StatusReason
	}{
		{"410: the resource version is too old", response{http.StatusGone, eventGone}, metav1.StatusReasonExpired},
		{"403: not allowed", response{http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"applications.argoproj.io is forbidden","reason":"Forbidden","code":403}`}, metav1.StatusReasonForbidden},
		{"404 without a Status", response{http.StatusNotFound, "404 page not found\n"}, metav1.StatusReasonNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, clientGo, oursErr, clientGoErr := watchBoth(t, tc.resp)
			if ours != nil || clientGo != nil {
				t.Fatalf("events from a refused watch: ours %v, client-go's %v", ours, clientGo)
			}
			if got := apierrors.ReasonForError(clientGoErr); got != tc.reason {
				t.Fatalf("client-go's error %v (%s), the case expects %s", clientGoErr, got, tc.reason)
			}
			var got, want apierrors.APIStatus
			if !errors.As(oursErr, &got) || !errors.As(clientGoErr, &want) {
				t.Fatalf("errors %v and %v (client-go's): want API statuses", oursErr, clientGoErr)
			}
			if !reflect.DeepEqual(got.Status(), want.Status()) {
				t.Errorf("error status\n got  %+v\n want %+v (client-go's)", got.Status(), want.Status())
			}
		})
	}

	t.Run("the connection closed before an answer", func(t *testing.T) {
		c := serve(t, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := c.Applications("argocd").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch: %v, want an empty watch", err)
		}
		if events := drain(ctx, t, w); len(events) != 0 {
			t.Errorf("events %v from a connection that answered nothing", events)
		}
	})
}

func eventTypes(events []watch.Event) []watch.EventType {
	var out []watch.EventType
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// sameErrorEvent checks an ERROR event against client-go's: the server's Status as it came, or,
// for an event that could not be decoded, the same code and reason (the messages name each
// decoder's own parse error).
func sameErrorEvent(t *testing.T, i int, got, want any) {
	t.Helper()
	g, ok := got.(*metav1.Status)
	w, ok2 := want.(*metav1.Status)
	if !ok || !ok2 {
		t.Fatalf("event %d: ERROR objects %T and %T (client-go's), want *metav1.Status", i, got, want)
	}
	if w.Code != http.StatusInternalServerError {
		if !reflect.DeepEqual(g, w) {
			t.Errorf("event %d: status\n got  %+v\n want %+v (client-go's)", i, g, w)
		}
		return
	}
	if g.Code != w.Code || g.Reason != w.Reason || !strings.Contains(g.Message, "unable to decode an event from the watch stream") {
		t.Errorf("event %d: status %d %s %q, want %d %s (client-go's %q)", i, g.Code, g.Reason, g.Message, w.Code, w.Reason, w.Message)
	}
}
