package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// TestMetricsOfTheBus proves the shared bus metrics on a real JetStream: published messages
// are counted by type and result, the durable consumer's pending, ack-pending and redelivered
// counts come from JetStream at scrape time, a redelivered message is counted as one, and the
// names carry the prefix and the binary label of the registerer the binary gives.
func TestMetricsOfTheBus(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(prometheus.WrapRegistererWithPrefix("aicr_", reg), "applier")
	if err := m.WatchConsumer(c); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchConsumer(c); err != nil {
		t.Fatalf("watching the consumer again: %v", err)
	}
	pub := NewPublisher(js, "planner", m)
	for i := range 3 {
		if err := pub.Publish(ctxFor(t), bus.ApplySubject("cluster", "nfd"), fmt.Sprint("m", i), applyCommand("nfd")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctxFor(t), bus.ApplySubject("cluster", "nfd"), "", applyCommand("nfd")); err == nil {
		t.Fatal("a publish without an ID succeeded")
	}
	gauge := func(name string) string {
		return fmt.Sprintf(`aicr_bus_consumer_%s{binary="applier",consumer="applier",stream="AICR_COMMANDS"}`, name)
	}
	want := func(lines ...string) {
		t.Helper()
		eventually(t, strings.Join(lines, ", "), func() (bool, string) {
			var b strings.Builder
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			text := rec.Body.String()
			for _, l := range lines {
				if !strings.Contains(text, l+"\n") {
					b.WriteString("missing " + l + "; ")
				}
			}
			return b.Len() == 0, b.String() + "\n" + text
		})
	}
	want(`aicr_bus_published_total{binary="applier",result="ok",type="`+bus.TypeApplyCommand+`"} 3`,
		`aicr_bus_published_total{binary="applier",result="error",type="`+bus.TypeApplyCommand+`"} 1`,
		gauge("pending_messages")+" 3", gauge("ack_pending_messages")+" 0")

	// The first delivery of m0 is nak'ed, so its second one counts as a redelivery.
	naked := false
	runDispatcher(t, &Dispatcher{Consumer: c, Metrics: m, Routes: Routes{bus.TypeApplyCommand: func(_ context.Context, msg *Message) error {
		if msg.ID == "m0" && !naked {
			naked = true
			return errors.New("not now")
		}
		return nil
	}}})
	want(gauge("pending_messages")+" 0", gauge("ack_pending_messages")+" 0",
		`aicr_bus_messages_total{binary="applier",result="ack",type="`+bus.TypeApplyCommand+`"} 3`,
		`aicr_bus_messages_total{binary="applier",result="nak",type="`+bus.TypeApplyCommand+`"} 1`,
		`aicr_bus_redeliveries_total{binary="applier",type="`+bus.TypeApplyCommand+`"} 1`)
}
