package refresher_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

func TestReporterSendsTheLatestStatusOnceAndRetriesWhileNATSIsAway(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	pub := &bustest.Recorder{}
	pub.FailNext(2, errors.New("nats: no responders available for request"))
	metrics, _ := newMetrics()
	r := &refresher.Reporter{Publisher: pub, Clock: clk, Metrics: metrics}

	// two reports before Run: only the newer matters
	r.Report("a", bus.CredentialsStatus{Mode: "aws"})
	r.Report("b", bus.CredentialsStatus{Mode: "aws", OK: true})
	run(t, r)

	// two failures: retried after 250ms, then 500ms, on the injected clock
	settled(t, clk)
	clk.Step(250 * time.Millisecond)
	settled(t, clk)
	clk.Step(500 * time.Millisecond)
	eventually(t, publishTimeout, "status b published", func() bool { return pub.Len() == 1 })
	if got := testutil.ToFloat64(metrics.PublishFailures); got != 2 {
		t.Errorf("publish failures metric = %v, want 2", got)
	}

	// the same ID says nothing new; a new one is sent
	r.Report("b", bus.CredentialsStatus{Mode: "aws", OK: true})
	r.Report("c", bus.CredentialsStatus{Mode: "aws"})
	eventually(t, publishTimeout, "status c published", func() bool { return pub.Len() == 2 })
	if got := pub.IDs(); got[0] != "b" || got[1] != "c" {
		t.Errorf("published %v, want [b c]", got)
	}
	for _, m := range pub.Sent() {
		if m.Subject != bus.SubjectCredentials || m.Msg.MessageType() != bus.TypeCredentialsStatus {
			t.Errorf("published a %s on %s; want a %s on %s", m.Msg.MessageType(), m.Subject, bus.TypeCredentialsStatus, bus.SubjectCredentials)
		}
	}
}
