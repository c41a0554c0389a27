package argoapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	kjson "sigs.k8s.io/json"
)

// Watch events are decoded in one pass. client-go's watch decoder reads each event four times
// over before building it: the JSON framer scans it to cut the frame, the frame is decoded into a
// metav1.WatchEvent (validated, then copied into its raw object), the raw object is decoded once
// for its apiVersion and kind and once more into the type (validated again). Readiness decodes
// every write of every Application it watches, each carrying Argo CD's copies of its Helm values;
// eventDecoder takes about half of client-go's time for the same events (BenchmarkWatchDecode).
// It reads the event's type, then decodes the object straight into an Application (a
// metav1.Status for an ERROR event), with the rules of client-go's JSON serializer: field names
// matched case-sensitively, unknown fields dropped, integers kept as integers, an object without
// the apiVersion and kind its type carries refused, and the decoded object's apiVersion and kind
// cleared as the REST client's decoder does. watch_test.go holds it to client-go's output on the
// same streams.

// watchStream returns the watch whose response body (or error) open gave, its events decoded by
// eventDecoder. It keeps what client-go's Request.Watch promises its callers (the request itself
// is made unthrottled by the caller): an error response is returned as the API error it carries
// (410 Gone as resource expired, so a reflector lists again), and a connection that ended or
// timed out before the response returns an empty watch (the reflector watches again from where
// it was, without listing; Request.Watch first retries such a request itself, here the
// reflector's backoff does).
func watchStream(body io.ReadCloser, err error) (watch.Interface, error) {
	if err != nil {
		if utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err) {
			return watch.NewEmptyWatch(), nil
		}
		return nil, err
	}
	// 500: the cause of an event that cannot be decoded is unknown (client-go reports the same).
	return watch.NewStreamWatcher(newEventDecoder(body),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// eventDecoder decodes a stream of watch events of Applications (watch.Decoder).
type eventDecoder struct {
	body io.ReadCloser
	dec  kjson.Decoder
}

func newEventDecoder(body io.ReadCloser) *eventDecoder {
	return &eventDecoder{body: body, dec: kjson.NewDecoderCaseSensitivePreserveInts(body)}
}

// Decode returns the next event. io.EOF at the end of the stream and the body's read errors are
// returned as they are: watch.StreamWatcher tells a normal end from a broken connection by them.
func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	tok, err := d.dec.Token()
	if err != nil {
		return "", nil, err
	}
	if tok != json.Delim('{') {
		return "", nil, fmt.Errorf("watch event: want a JSON object, got %v", tok)
	}
	var (
		typ    string
		obj    runtime.Object
		early  json.RawMessage // the object, when it came before the type
		seen   bool
		object = func(raw []byte) error {
			o, err := newEventObject(typ)
			if err != nil {
				return err
			}
			if raw != nil {
				err = kjson.UnmarshalCaseSensitivePreserveInts(raw, o)
			} else {
				err = d.dec.Decode(o)
			}
			if err != nil {
				return midEvent(err)
			}
			if err := checkKind(typ, o); err != nil {
				return err
			}
			o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			obj = o
			return nil
		}
	)
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return "", nil, midEvent(err)
		}
		switch tok {
		case "type":
			if err := d.dec.Decode(&typ); err != nil {
				return "", nil, midEvent(err)
			}
		case "object":
			seen = true
			if typ == "" {
				if err := d.dec.Decode(&early); err != nil {
					return "", nil, midEvent(err)
				}
				continue
			}
			if err := object(nil); err != nil {
				return "", nil, err
			}
		default:
			var skip json.RawMessage
			if err := d.dec.Decode(&skip); err != nil {
				return "", nil, midEvent(err)
			}
		}
	}
	if _, err := d.dec.Token(); err != nil { // the event's closing brace
		return "", nil, midEvent(err)
	}
	if !seen {
		return "", nil, fmt.Errorf("watch event %q has no object", typ)
	}
	if obj == nil {
		if err := object(early); err != nil {
			return "", nil, err
		}
	}
	return watch.EventType(typ), obj, nil
}

// midEvent returns an error met inside an event as it is (the body's read errors, io.EOF
// turned into io.ErrUnexpectedEOF: the stream ended inside an event), so watch.StreamWatcher
// tells a stream cut by the server or the network, which it ends quietly, from one it cannot
// decode, which it reports; it adds the context itself.
func midEvent(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// newEventObject returns what an event of type typ carries.
func newEventObject(typ string) (runtime.Object, error) {
	switch watch.EventType(typ) {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		return &Application{}, nil
	case watch.Error:
		return &metav1.Status{}, nil
	}
	return nil, fmt.Errorf("got invalid watch event type: %q", typ)
}

// checkKind refuses an event whose object is not what its type carries: an Application of
// argoproj.io/v1alpha1, or for an ERROR event a Status. client-go's decoder reads the object's
// kind from its apiVersion and kind, and fails on an object without them (a null one too), so
// this decoder does not take every JSON object for an Application.
func checkKind(typ string, o runtime.Object) error {
	gvk := o.GetObjectKind().GroupVersionKind()
	want := SchemeGroupVersion.WithKind("Application")
	if _, ok := o.(*metav1.Status); ok {
		// The API server sends v1; client-go's scheme also knows Status in this group.
		want = schema.GroupVersionKind{Version: "v1", Kind: "Status"}
		if gvk == SchemeGroupVersion.WithKind("Status") {
			return nil
		}
	}
	if gvk == want {
		return nil
	}
	return fmt.Errorf("watch event %s: the object's apiVersion and kind are %q and %q, want %q and %q",
		typ, gvk.GroupVersion(), gvk.Kind, want.GroupVersion(), want.Kind)
}

// Close closes the response body, which ends a Decode in progress.
func (d *eventDecoder) Close() { _ = d.body.Close() }
