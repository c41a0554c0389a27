package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/admission/internal/certs"
	"github.com/aicr-run/aicr-operator/admission/internal/rules"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

const applier = "system:serviceaccount:aicr-system:aicr-operator-applier"

// fakeAuditor keeps the denials it is handed.
type fakeAuditor struct {
	mu  sync.Mutex
	got []*bus.AdmissionDenial
}

func (f *fakeAuditor) Record(d *bus.AdmissionDenial) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, d)
}

func newHandler(t testing.TB) (*Handler, *fakeAuditor, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a := &fakeAuditor{}
	v := rules.New(rules.Config{OperatorIdentities: []string{applier}, Namespace: "aicr-system", EngineNamespace: "argocd"})
	return NewHandler(v, a, NewMetrics(reg, "admission"), zerolog.Nop()), a, reg
}

// armedApplication is an Application carrying the resources finalizer, padded to size bytes.
func armedApplication(size int) []byte {
	obj := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "gpu-operator", "namespace": "argocd",
			"finalizers": []string{"resources-finalizer.argocd.argoproj.io"}},
		"spec": map[string]any{"padding": strings.Repeat("x", size)},
	}
	data, _ := json.Marshal(obj)
	return data
}

func reviewBody(t testing.TB, user string, obj []byte) []byte {
	t.Helper()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0b6f3c1e-1",
			Kind:      metav1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"},
			Resource:  metav1.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"},
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: user},
			Namespace: "argocd", Name: "gpu-operator",
			Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: obj},
		},
	}
	data, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func post(h http.Handler, body []byte, contentType string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, Path+"?timeout=5s", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHandlerDeniesWithFieldPathAndAudits proves a denial reaches the API server with the field
// path in the message and in details.causes, is handed to the audit stream and is counted by
// rule.
func TestHandlerDeniesWithFieldPathAndAudits(t *testing.T) {
	h, audit, reg := newHandler(t)
	rec := post(h, reviewBody(t, applier, armedApplication(10)), "application/json")
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d; want 200 (%s)", rec.Code, rec.Body)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	msg := "Application argocd/gpu-operator carries the finalizer resources-finalizer.argocd.argoproj.io without the annotation operator.aicr.run/delete-rollout, " +
		"so the operator (" + applier + ") may not write or delete it: deleting it would delete the release's resources. " +
		"Remove the finalizer to let the operator manage the Application again; to remove the component, take it out of the ClusterRuntime's plan"
	want := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{
			UID: "0b6f3c1e-1", Allowed: false,
			Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: "metadata.finalizers: " + msg,
				Details: &metav1.StatusDetails{Name: "gpu-operator", Group: "argoproj.io", Kind: "Application",
					Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "metadata.finalizers", Message: msg}}},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("review (-want +got):\n%s", diff)
	}
	wantAudit := []*bus.AdmissionDenial{{
		UID: "0b6f3c1e-1", User: applier, Operation: "UPDATE", Resource: "argoproj.io/applications",
		Namespace: "argocd", Name: "gpu-operator", Rule: rules.RuleApplicationFinalizer,
		Field: "metadata.finalizers", Message: "metadata.finalizers: " + msg,
	}}
	if diff := cmp.Diff(wantAudit, audit.got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if n := testutil.ToFloat64(h.metrics.denials.WithLabelValues(rules.RuleApplicationFinalizer)); n != 1 {
		t.Errorf("denials_total{rule=%s} = %v; want 1", rules.RuleApplicationFinalizer, n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gather metrics: %v", err)
	}
}

// TestDryRunIsDeniedButNotAudited proves what sideEffects NoneOnDryRun declares: a dry run is
// judged like any request (the same denial) but publishes no audit record, while the same
// request for real does.
func TestDryRunIsDeniedButNotAudited(t *testing.T) {
	h, audit, _ := newHandler(t)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(reviewBody(t, applier, armedApplication(10)), &review); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		review.Request.DryRun = &dry
		body, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		rec := post(h, body, "application/json")
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil || got.Response.Allowed {
			t.Fatalf("dry run %v: answer %d %s; want a denial", dry, rec.Code, rec.Body)
		}
		audit.mu.Lock()
		n := len(audit.got)
		audit.mu.Unlock()
		if want := map[bool]int{true: 0, false: 1}[dry]; n != want {
			t.Errorf("after the request with dry run %v: %d audit records, want %d", dry, n, want)
		}
	}
}

// TestHandlerAllowsAndWarns proves an allowed request carries the rule's warning and is not
// audited.
func TestHandlerAllowsAndWarns(t *testing.T) {
	h, audit, _ := newHandler(t)
	obj := []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"gpu-operator","namespace":"argocd","labels":{"app.kubernetes.io/managed-by":"aicr-operator"}},"spec":{"project":"aicr"}}`)
	body := bytes.Replace(reviewBody(t, "alice", obj), []byte(`"operation":"UPDATE"`), []byte(`"operation":"CREATE"`), 1)
	rec := post(h, body, "application/json; charset=utf-8")
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("decode %q: %v", rec.Body, err)
	}
	if !got.Response.Allowed || len(got.Response.Warnings) != 1 || got.Response.Result != nil {
		t.Errorf("response = %+v; want allowed with one warning", got.Response)
	}
	if len(audit.got) != 0 {
		t.Errorf("audited %d allowed requests; want none", len(audit.got))
	}
}

// TestHandlerRefusesMalformedRequests proves malformed requests get a 4xx and never reach the
// rules.
func TestHandlerRefusesMalformedRequests(t *testing.T) {
	cases := map[string]struct {
		method      string
		body        []byte
		contentType string
		wantCode    int
		wantBody    string
	}{
		"not JSON": {
			body: []byte("{not json"), contentType: "application/json",
			wantCode: 400, wantBody: "decode admission review: invalid character 'n' looking for beginning of object key string\n",
		},
		"wrong content type": {
			body: reviewBody(t, applier, armedApplication(1)), contentType: "application/yaml",
			wantCode: 400, wantBody: "content type \"application/yaml\": only application/json is accepted\n",
		},
		"no content type": {
			body: reviewBody(t, applier, armedApplication(1)), wantCode: 400,
			wantBody: "content type \"\": only application/json is accepted\n",
		},
		"request missing": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), contentType: "application/json",
			wantCode: 400, wantBody: "decode admission review: request is missing\n",
		},
		"request without a UID": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), contentType: "application/json",
			wantCode: 400, wantBody: "decode admission review: request.uid is missing\n",
		},
		"admission v1beta1": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), contentType: "application/json",
			wantCode: 400, wantBody: "decode admission review: got apiVersion \"admission.k8s.io/v1beta1\" kind \"AdmissionReview\"; only admission.k8s.io/v1 AdmissionReview is accepted\n",
		},
		"a body over the limit": {
			body: reviewBody(t, applier, armedApplication(MaxBodyBytes)), contentType: "application/json",
			wantCode: 413, wantBody: "request body is over 3145728 bytes\n",
		},
		"GET": {
			method: http.MethodGet, contentType: "application/json",
			wantCode: 405, wantBody: "method GET: only POST is accepted\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, audit, _ := newHandler(t)
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, Path, bytes.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("got %d %q; want %d %q", rec.Code, rec.Body, tc.wantCode, tc.wantBody)
			}
			if len(audit.got) != 0 {
				t.Errorf("audited a malformed request")
			}
		})
	}
}

// TestHandlerAnswersAOneMebibyteObject proves a review of a 1 MiB object is decided (the time it
// takes is measured by BenchmarkHandlerOneMebibyte, not asserted here).
func TestHandlerAnswersAOneMebibyteObject(t *testing.T) {
	h, _, _ := newHandler(t)
	rec := post(h, reviewBody(t, applier, armedApplication(1<<20)), "application/json")
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("status %d, decode: %v", rec.Code, err)
	}
	if got.Response == nil || got.Response.Allowed {
		t.Errorf("response = %+v; want a denial", got.Response)
	}
}

func BenchmarkHandlerOneMebibyte(b *testing.B) {
	h, _, _ := newHandler(b)
	body := reviewBody(b, applier, armedApplication(1<<20))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if rec := post(h, body, "application/json"); rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

// FuzzAdmissionReview proves the handler never panics on any body: it answers 200 with a
// review whose response echoes the request UID, or a 4xx.
func FuzzAdmissionReview(f *testing.F) {
	f.Add(reviewBody(f, applier, armedApplication(1)))
	f.Add(reviewBody(f, "alice", []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"aicr-operator"}}}`)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"group":"operator.aicr.run","resource":"runtimerollouts"},"operation":"UPDATE","object":{"spec":{"approval":{"approvedBy":1}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"resource":"configmaps"},"operation":"DELETE","oldObject":{"metadata":{"labels":{"operator.aicr.run/role":"plan"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"group":"operator.aicr.run","resource":"clusterruntimes"},"operation":"CREATE","object":{"metadata":{"name":"x"},"spec":{"bundle":{}}}}}`))
	f.Add([]byte(`null`))
	h, _, _ := newHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(h, body, "application/json")
		switch {
		case rec.Code == http.StatusOK:
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("200 with an undecodable body: %v", err)
			}
			in, err := DecodeReview(body)
			if err != nil {
				t.Fatalf("200 for a body DecodeReview refuses: %v", err)
			}
			if got.Response == nil || got.Response.UID != in.Request.UID {
				t.Fatalf("response %+v does not answer request %s", got.Response, in.Request.UID)
			}
			if !got.Response.Allowed && (got.Response.Result == nil || got.Response.Result.Message == "") {
				t.Fatalf("a denial without a message: %+v", got.Response)
			}
		case rec.Code == http.StatusBadRequest || rec.Code == http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// TestServerSpeaksOnlyTLS12OrNewer proves the server answers reviews over TLS, refuses plain
// HTTP and refuses TLS 1.1.
func TestServerSpeaksOnlyTLS12OrNewer(t *testing.T) {
	pair := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := pair.Write(t, t.TempDir())
	h, _, _ := newHandler(t)
	srv, err := Listen("127.0.0.1:0", certs.ServerConfig(certs.NewReloader(certFile, keyFile)), h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	url := "https://" + srv.Addr() + Path

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pair.Pool()}}}
	resp, err := client.Post(url, "application/json", bytes.NewReader(reviewBody(t, applier, armedApplication(1))))
	if err != nil {
		t.Fatalf("POST over TLS: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST over TLS: status %d; want 200", resp.StatusCode)
	}

	plain, err := http.Post("http://"+srv.Addr()+Path, "application/json", bytes.NewReader(reviewBody(t, applier, armedApplication(1))))
	if err == nil {
		body, _ := io.ReadAll(plain.Body)
		_ = plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200 (%s); want it refused", body)
		}
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pair.Pool(), MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Post(url, "application/json", bytes.NewReader(nil)); err == nil {
		_ = resp.Body.Close()
		t.Errorf("TLS 1.1 handshake succeeded; want it refused")
	}
}

// TestListenRequiresTLS12 proves the server cannot be built without a TLS 1.2 floor.
func TestListenRequiresTLS12(t *testing.T) {
	if _, err := Listen("127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS10}, http.NotFoundHandler()); err == nil {
		t.Error("Listen with MinVersion TLS 1.0 = nil error; want refused")
	}
}

// FuzzApplicationWrites checks two safety properties of Application writes against an oracle
// written from docs/admission.md, not from admission/internal/rules: for any operation, writer,
// labels, finalizers, annotation and spec the fuzzer picks,
//
//   - the operator never writes an armed Application (application-finalizer): a CREATE or UPDATE
//     by an operator identity whose new or stored object carries
//     resources-finalizer.argocd.argoproj.io, or its DELETE of a stored object that does, without
//     the operator.aicr.run/delete-rollout annotation, is denied;
//   - no identity but the operator's writes an owned Application's spec unannounced
//     (application-managed-by): a CREATE of an Application labelled
//     app.kubernetes.io/managed-by=aicr-operator, or an UPDATE of one (labelled before and after)
//     that changes its spec, by anyone else (look-alikes of the operator's username included) is
//     denied or answered with a warning naming the label; the operator forces such a spec back.
//
// Every answer is a well-formed 200 to the request it was sent for. FuzzAdmissionReview fuzzes
// the bytes; this target fuzzes the meaning.
func FuzzApplicationWrites(f *testing.F) {
	f.Add(uint8(1), uint8(0), false, false, false, true, "", "https://charts.example.com", "1.0.0", "https://charts.example.com", "1.0.0")
	f.Add(uint8(1), uint8(1), true, true, false, false, "", "https://charts.example.com", "1.0.0", "https://charts.example.com", "1.0.1")
	f.Add(uint8(0), uint8(1), true, true, false, false, "", "", "", "oci://registry.example.com/charts", "2.0.0")
	f.Add(uint8(2), uint8(0), true, true, true, false, "", "https://charts.example.com", "1.0.0", "", "")
	f.Add(uint8(1), uint8(4), true, true, false, false, "", "https://charts.example.com", "1.0.0", "https://evil.example.com", "1.0.0")
	f.Add(uint8(1), uint8(0), true, true, true, true, "rollout-1", "https://charts.example.com", "1.0.0", "https://charts.example.com", "1.0.0")
	f.Add(uint8(1), uint8(5), true, true, false, false, "", "https://charts.example.com", "1.0.0", "https://charts.example.com", "9.9.9")
	f.Add(uint8(0), uint8(6), false, true, false, false, "", "", "", "https://charts.example.com", "1.0.0")
	h, _, _ := newHandler(f)
	f.Fuzz(func(t *testing.T, opN, whoN uint8, oldLabelled, newLabelled, oldFinalizer, newFinalizer bool,
		annotation, oldRepo, oldRev, newRepo, newRev string) {
		ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
		op := ops[int(opN)%len(ops)]
		writers := []string{
			applier, // the only operator identity newHandler configures
			"alice@example.com",
			"system:serviceaccount:argocd:argocd-application-controller",
			"",
			applier + " ", // look-alikes are someone else
			strings.ToUpper(applier),
			"system:serviceaccount:aicr-system:aicr-operator-applier2",
		}
		who := writers[int(whoN)%len(writers)]
		operator := who == applier

		app := func(labelled, finalizer bool, repo, rev string) map[string]any {
			meta := map[string]any{"name": "gpu-operator", "namespace": "argocd"}
			if labelled {
				meta["labels"] = map[string]any{"app.kubernetes.io/managed-by": "aicr-operator"}
			}
			if finalizer {
				meta["finalizers"] = []any{"resources-finalizer.argocd.argoproj.io"}
			}
			if annotation != "" {
				meta["annotations"] = map[string]any{"operator.aicr.run/delete-rollout": annotation}
			}
			return map[string]any{
				"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": meta,
				"spec": map[string]any{
					"project":     "default",
					"source":      map[string]any{"repoURL": repo, "targetRevision": rev, "chart": "gpu-operator"},
					"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "gpu-operator"},
				},
			}
		}
		raw := func(obj map[string]any) runtime.RawExtension {
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			return runtime.RawExtension{Raw: data}
		}
		req := &admissionv1.AdmissionRequest{
			UID:       "fuzz-1",
			Kind:      metav1.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"},
			Resource:  metav1.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"},
			Operation: op,
			UserInfo:  authenticationv1.UserInfo{Username: who},
			Namespace: "argocd", Name: "gpu-operator",
		}
		if op != admissionv1.Delete {
			req.Object = raw(app(newLabelled, newFinalizer, newRepo, newRev))
		}
		if op != admissionv1.Create {
			req.OldObject = raw(app(oldLabelled, oldFinalizer, oldRepo, oldRev))
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
		if err != nil {
			t.Fatal(err)
		}

		rec := post(h, body, "application/json")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d for a well-formed review: %s", rec.Code, rec.Body)
		}
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil || got.Response.UID != req.UID {
			t.Fatalf("answer %s (%v) does not answer request %s", rec.Body, err, req.UID)
		}
		resp := got.Response
		warned := false
		for _, w := range resp.Warnings {
			if strings.Contains(w, "app.kubernetes.io/managed-by") {
				warned = true
			}
		}

		// The oracle.
		armed := false
		switch op {
		case admissionv1.Create:
			armed = newFinalizer
		case admissionv1.Update:
			armed = newFinalizer || oldFinalizer
		case admissionv1.Delete:
			armed = oldFinalizer
		}
		if operator && armed && annotation == "" && resp.Allowed {
			t.Fatalf("the operator's %s of an Application carrying the resources finalizer without a delete-rollout annotation was allowed (old finalizer %v, new %v)",
				op, oldFinalizer, newFinalizer)
		}
		// As the webhook sees them: JSON carries text as UTF-8, each invalid byte becoming U+FFFD,
		// so two different invalid strings can arrive as the same one.
		sent := func(s string) string {
			b, _ := json.Marshal(s)
			var out string
			_ = json.Unmarshal(b, &out)
			return out
		}
		specChanged := sent(oldRepo) != sent(newRepo) || sent(oldRev) != sent(newRev)
		owned := (op == admissionv1.Create && newLabelled) || (op == admissionv1.Update && oldLabelled && newLabelled && specChanged)
		if !operator && owned && resp.Allowed && !warned {
			t.Fatalf("%q's %s of the spec of an Application labelled managed-by aicr-operator was allowed without a warning naming the label (warnings %q)",
				who, op, resp.Warnings)
		}
	})
}
