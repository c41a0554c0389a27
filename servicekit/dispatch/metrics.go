package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

// LabelBinary names the binary on the metrics every binary shares.
const LabelBinary = "binary"

// consumerInfoTimeout bounds the consumer info request a scrape makes.
const consumerInfoTimeout = 2 * time.Second

// Metrics are the bus metrics every binary shares. Registered on the binary's metrics
// registerer (service.Base.Metrics, which prefixes aicr_), they are aicr_bus_*, with the binary
// in label binary:
//
//	aicr_bus_messages_total{type,result}       messages handled: ack, nak, retry, term, ignored, parked
//	aicr_bus_redeliveries_total{type}          messages handled that JetStream had delivered before
//	aicr_bus_handle_seconds{type}              time in a handler
//	aicr_bus_published_total{type,result}      messages published: ok, error
//	aicr_bus_consumer_pending_messages{stream,consumer}      not yet delivered (WatchConsumer)
//	aicr_bus_consumer_ack_pending_messages{stream,consumer}  delivered, not yet acknowledged
//	aicr_bus_consumer_redelivered_messages{stream,consumer}  delivered more than once, not yet acknowledged
type Metrics struct {
	handled     *prometheus.CounterVec
	redelivered *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	published   *prometheus.CounterVec
	reg         prometheus.Registerer
	labels      prometheus.Labels
}

// NewMetrics registers the bus metrics of binary with reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer, binary string) *Metrics {
	labels := prometheus.Labels{LabelBinary: binary}
	m := &Metrics{
		reg: reg, labels: labels,
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "bus", Name: "messages_total", ConstLabels: labels,
			Help: "Messages handled, by type and result (ack, nak, retry, term, ignored, parked).",
		}, []string{"type", "result"}),
		redelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "bus", Name: "redeliveries_total", ConstLabels: labels,
			Help: "Messages handled that JetStream had delivered before (a nak, a retry, an acknowledgement that did not arrive), by type.",
		}, []string{"type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "bus", Name: "handle_seconds", ConstLabels: labels,
			Help:    "Time spent in a handler, by type.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"type"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "bus", Name: "published_total", ConstLabels: labels,
			Help: "Messages published to JetStream, by type and result (ok: stored, error).",
		}, []string{"type", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.handled, m.redelivered, m.duration, m.published)
	}
	return m
}

// declare starts the counters of every routed message type at zero, so a rate or an alert on
// them works before the first message (or the first redelivery).
func (m *Metrics) declare(routes Routes) {
	if m == nil {
		return
	}
	for typ := range routes {
		m.handled.WithLabelValues(typ, "ack")
		m.handled.WithLabelValues(typ, "parked") // an alert on a parked message works from the start
		m.redelivered.WithLabelValues(typ)
	}
}

// WatchConsumer adds the durable consumer's pending, ack-pending and redelivered counts, read
// from JetStream at each scrape (a scrape that cannot read them leaves them out). Watching the
// same consumer again is a no-op.
func (m *Metrics) WatchConsumer(c jetstream.Consumer) error {
	if m == nil || m.reg == nil {
		return nil
	}
	err := m.reg.Register(&consumerCollector{c: c, descs: consumerDescs(m.labels)})
	var are prometheus.AlreadyRegisteredError
	if err != nil && !errors.As(err, &are) {
		return fmt.Errorf("register consumer metrics: %w", err)
	}
	return nil
}

type consumerCollector struct {
	c     jetstream.Consumer
	descs [3]*prometheus.Desc
}

func consumerDescs(labels prometheus.Labels) [3]*prometheus.Desc {
	vars := []string{"stream", "consumer"}
	return [3]*prometheus.Desc{
		prometheus.NewDesc("bus_consumer_pending_messages", "Messages of the durable consumer's subjects not yet delivered.", vars, labels),
		prometheus.NewDesc("bus_consumer_ack_pending_messages", "Messages delivered to the durable consumer and not yet acknowledged.", vars, labels),
		prometheus.NewDesc("bus_consumer_redelivered_messages", "Messages delivered more than once and not yet acknowledged.", vars, labels),
	}
}

func (cc *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cc.descs {
		ch <- d
	}
}

func (cc *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), consumerInfoTimeout)
	defer cancel()
	info, err := cc.c.Info(ctx)
	if err != nil {
		return
	}
	for i, v := range []float64{float64(info.NumPending), float64(info.NumAckPending), float64(info.NumRedelivered)} {
		ch <- prometheus.MustNewConstMetric(cc.descs[i], prometheus.GaugeValue, v, info.Stream, info.Name)
	}
}

// Publisher is bus.Publisher that counts what it publishes (aicr_bus_published_total).
type Publisher struct {
	pub *bus.Publisher
	m   *Metrics
}

// NewPublisher returns a counting publisher for the binary named source; m may be nil.
func NewPublisher(js jetstream.JetStream, source string, m *Metrics) *Publisher {
	return &Publisher{pub: bus.NewPublisher(js, source), m: m}
}

// PublishMsg is bus.Publisher.PublishMsg: a parked message, or one sent back from the parked
// stream (not counted by type: it is another's message).
func (p *Publisher) PublishMsg(ctx context.Context, msg *nats.Msg) error {
	return p.pub.PublishMsg(ctx, msg)
}

// Publish is bus.Publisher.Publish, counted.
func (p *Publisher) Publish(ctx context.Context, subject, id string, msg bus.Envelope) error {
	err := p.pub.Publish(ctx, subject, id, msg)
	if p.m != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		p.m.published.WithLabelValues(msg.MessageType(), result).Inc()
	}
	return err
}
