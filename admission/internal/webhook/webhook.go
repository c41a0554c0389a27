// Package webhook is the HTTP side of the admission webhook: it reads an admission.k8s.io/v1
// AdmissionReview, asks the rules, answers with the decision (field paths in the message and
// in details.causes, warnings), records each denial for audit, and counts everything. Malformed
// requests get HTTP 400 and never reach the rules.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/admission/internal/rules"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Path is where the webhook listens for AdmissionReviews.
const Path = "/validate"

// Limits.
const (
	// MaxBodyBytes bounds an AdmissionReview: an object and its old version, each at most the
	// API server's 1.5 MiB request limit, fit with room for the envelope.
	MaxBodyBytes = 3 << 20
	// DefaultTimeout bounds one decision when the API server does not say its own timeout.
	DefaultTimeout = 10 * time.Second
	// timeoutMargin is kept from the API server's timeout so the answer arrives in time.
	timeoutMargin = 500 * time.Millisecond
)

// Validator decides one request; *rules.Validator implements it.
type Validator interface {
	Validate(ctx context.Context, req *admissionv1.AdmissionRequest) rules.Decision
}

// Auditor takes a denial for the audit stream without blocking; *audit.Recorder implements it.
type Auditor interface {
	Record(d *bus.AdmissionDenial)
}

// Handler serves AdmissionReviews at Path.
type Handler struct {
	validator Validator
	auditor   Auditor
	metrics   *Metrics
	log       zerolog.Logger
}

// NewHandler returns the webhook's handler. auditor may be nil (no audit).
func NewHandler(v Validator, a Auditor, m *Metrics, log zerolog.Logger) *Handler {
	return &Handler{validator: v, auditor: a, metrics: m, log: log}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	review, status, err := decodeReview(w, r)
	if err != nil {
		h.metrics.malformed.WithLabelValues(fmt.Sprint(status)).Inc()
		h.log.Debug().Err(err).Int("status", status).Msg("refuse malformed admission review")
		http.Error(w, err.Error(), status)
		return
	}
	req := review.Request
	ctx, cancel := context.WithTimeout(r.Context(), decisionTimeout(r))
	defer cancel()
	d := h.validator.Validate(ctx, req)
	resp := response(req, d)
	h.observe(req, d, time.Since(start))
	if !d.Allowed() {
		h.record(req, d)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	body, err := json.Marshal(out)
	if err != nil {
		// Cannot happen for these types; answer something the API server can act on.
		http.Error(w, "encode admission review: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// decodeReview reads and checks the request; a non-nil error comes with the HTTP status.
func decodeReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("method %s: only POST is accepted", r.Method)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, http.StatusBadRequest, fmt.Errorf("content type %q: only application/json is accepted", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is over %d bytes", MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	review, err := DecodeReview(body)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	return review, http.StatusOK, nil
}

// DecodeReview parses an admission.k8s.io/v1 AdmissionReview that carries a request with a UID.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decode admission review: %w", err)
	}
	gvk := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	if review.APIVersion != gvk.GroupVersion().String() || review.Kind != gvk.Kind {
		return nil, fmt.Errorf("decode admission review: got apiVersion %q kind %q; only %s %s is accepted",
			review.APIVersion, review.Kind, gvk.GroupVersion(), gvk.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("decode admission review: request is missing")
	}
	if review.Request.UID == "" {
		return nil, errors.New("decode admission review: request.uid is missing")
	}
	return &review, nil
}

// decisionTimeout is the API server's timeout (the ?timeout= it adds to the webhook URL) less a
// margin, or DefaultTimeout.
func decisionTimeout(r *http.Request) time.Duration {
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 2*timeoutMargin {
		return t - timeoutMargin
	}
	return DefaultTimeout
}

// response turns a decision into an AdmissionResponse; a denial's status carries the field
// paths in its message and one cause per violation.
func response(req *admissionv1.AdmissionRequest, d rules.Decision) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: d.Allowed(), Warnings: d.Warnings}
	if d.Allowed() {
		return resp
	}
	causes := make([]metav1.StatusCause, len(d.Violations))
	for i, v := range d.Violations {
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: v.Field, Message: v.Message}
	}
	reason := metav1.StatusReasonForbidden
	if d.Code == http.StatusBadRequest {
		reason = metav1.StatusReasonBadRequest
	}
	resp.Result = &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    d.Code,
		Reason:  reason,
		Message: d.Message(),
		Details: &metav1.StatusDetails{
			Name:   req.Name,
			Group:  req.Resource.Group,
			Kind:   req.Kind.Kind,
			Causes: causes,
		},
	}
	return resp
}

func (h *Handler) observe(req *admissionv1.AdmissionRequest, d rules.Decision, took time.Duration) {
	resource := req.Resource.Group + "/" + req.Resource.Resource
	h.metrics.requests.WithLabelValues(resource, string(req.Operation), fmt.Sprint(d.Allowed())).Inc()
	h.metrics.duration.WithLabelValues(resource).Observe(took.Seconds())
	seen := map[string]bool{}
	for _, v := range d.Violations {
		if !seen[v.Rule] {
			seen[v.Rule] = true
			h.metrics.denials.WithLabelValues(v.Rule).Inc()
		}
	}
	for _, rule := range d.WarningRules {
		h.metrics.warnings.WithLabelValues(rule).Inc()
	}
}

func (h *Handler) record(req *admissionv1.AdmissionRequest, d rules.Decision) {
	h.log.Info().
		Str("uid", string(req.UID)).Str("user", req.UserInfo.Username).Str("operation", string(req.Operation)).
		Str("resource", req.Resource.Group+"/"+req.Resource.Resource).Str("namespace", req.Namespace).
		Str(logging.KeyResourceName, req.Name).Str("rule", d.Rule()).Str("field", d.Field()).
		Msg("deny admission request")
	// A dry run changes nothing, so it is not audited (the configuration says sideEffects:
	// NoneOnDryRun).
	if h.auditor == nil || (req.DryRun != nil && *req.DryRun) {
		return
	}
	h.auditor.Record(&bus.AdmissionDenial{
		UID:       string(req.UID),
		User:      req.UserInfo.Username,
		Operation: string(req.Operation),
		Resource:  req.Resource.Group + "/" + req.Resource.Resource,
		Namespace: req.Namespace,
		Name:      req.Name,
		Rule:      d.Rule(),
		Field:     d.Field(),
		Message:   d.Message(),
	})
}

// Metrics are the webhook's Prometheus metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	denials   *prometheus.CounterVec
	warnings  *prometheus.CounterVec
	malformed *prometheus.CounterVec
	duration  *prometheus.HistogramVec
}

// NewMetrics registers the webhook's metrics on reg under namespace (the binary's Name).
func NewMetrics(reg prometheus.Registerer, namespace string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "requests_total",
			Help: "AdmissionReviews answered, by resource (group/resource), operation and whether allowed.",
		}, []string{"resource", "operation", "allowed"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "denials_total",
			Help: "Requests denied, by rule.",
		}, []string{"rule"}),
		warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "warnings_total",
			Help: "Warnings returned, by rule.",
		}, []string{"rule"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "malformed_requests_total",
			Help: "Requests refused before the rules (bad method, content type, size or JSON), by HTTP status.",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "decision_duration_seconds",
			Help:    "Time to decide an AdmissionReview, by resource.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"resource"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.denials, m.warnings, m.malformed, m.duration)
	}
	return m
}
