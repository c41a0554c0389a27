// Package audit publishes each admission denial on NATS, best effort: the webhook hands a
// denial over without waiting, one owned loop publishes it with a short timeout, and a full
// queue or an unreachable NATS drops records (counted) rather than slow an admission answer.
package audit

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Defaults.
const (
	// DefaultQueue is how many denials may wait for publishing.
	DefaultQueue = 1024
	// DefaultPublishTimeout bounds one publish.
	DefaultPublishTimeout = 2 * time.Second
	// drainTimeout bounds publishing what is still queued at shutdown.
	drainTimeout = 3 * time.Second
)

// Publisher sends one message; *bus.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// Recorder queues denials and publishes them on bus.SubjectAudit with the request UID as the
// message ID (a retried review is recorded once).
type Recorder struct {
	pub     Publisher
	timeout time.Duration
	queue   chan *bus.AdmissionDenial
	results *prometheus.CounterVec
}

// NewRecorder returns a Recorder publishing through pub. Its metrics are registered on reg
// under namespace (the binary's Name).
func NewRecorder(pub Publisher, reg prometheus.Registerer, namespace string) *Recorder {
	r := &Recorder{
		pub:     pub,
		timeout: DefaultPublishTimeout,
		queue:   make(chan *bus.AdmissionDenial, DefaultQueue),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "audit_records_total",
			Help: "Denials handed to the audit stream, by result: published, failed (NATS error) or dropped (queue full).",
		}, []string{"result"}),
	}
	for _, res := range []string{"published", "failed", "dropped"} {
		r.results.WithLabelValues(res)
	}
	if reg != nil {
		reg.MustRegister(r.results)
	}
	return r
}

// Record queues d without blocking; when the queue is full, d is dropped and counted.
func (r *Recorder) Record(d *bus.AdmissionDenial) {
	select {
	case r.queue <- d:
	default:
		r.results.WithLabelValues("dropped").Inc()
	}
}

// Run publishes queued denials until ctx ends, then publishes what is still queued within a
// few seconds. It returns nil: audit failures never stop the webhook.
func (r *Recorder) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		select {
		case d := <-r.queue:
			r.publish(ctx, d)
		case <-ctx.Done():
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	for {
		select {
		case d := <-r.queue:
			r.publish(dctx, d)
		default:
			return nil
		}
	}
}

func (r *Recorder) publish(ctx context.Context, d *bus.AdmissionDenial) {
	if ctx.Err() != nil {
		r.results.WithLabelValues("dropped").Inc()
		return
	}
	pctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.pub.Publish(pctx, bus.SubjectAudit, d.UID, d); err != nil {
		r.results.WithLabelValues("failed").Inc()
		logging.From(ctx).Warn().Err(err).Str(logging.KeyMsgID, d.UID).Str("rule", d.Rule).Msg("publish admission denial")
		return
	}
	r.results.WithLabelValues("published").Inc()
}
