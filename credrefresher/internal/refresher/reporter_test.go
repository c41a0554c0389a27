package refresher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// fakePublisher records publications and fails the first failN.
type fakePublisher struct {
	mu    sync.Mutex
	failN int
	ids   []string
}

func (p *fakePublisher) Publish(_ context.Context, subject, id string, m bus.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if subject != bus.SubjectCredentials || m.MessageType() != bus.TypeCredentialsStatus {
		return errors.New("wrong subject or type")
	}
	if p.failN > 0 {
		p.failN--
		return errors.New("nats: no responders available for request")
	}
	p.ids = append(p.ids, id)
	return nil
}

func (p *fakePublisher) published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

func TestReporterSendsTheLatestStatusOnceAndRetriesWhileNATSIsAway(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	pub := &fakePublisher{failN: 2}
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
	eventually(t, publishTimeout, "status b published", func() bool { return len(pub.published()) == 1 })
	if got := testutil.ToFloat64(metrics.PublishFailures); got != 2 {
		t.Errorf("publish failures metric = %v, want 2", got)
	}

	// the same ID says nothing new; a new one is sent
	r.Report("b", bus.CredentialsStatus{Mode: "aws", OK: true})
	r.Report("c", bus.CredentialsStatus{Mode: "aws"})
	eventually(t, publishTimeout, "status c published", func() bool { return len(pub.published()) == 2 })
	if got := pub.published(); got[0] != "b" || got[1] != "c" {
		t.Errorf("published %v, want [b c]", got)
	}
}
