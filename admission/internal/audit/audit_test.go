package audit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

// fakePublisher records what it is asked to publish, or fails with err.
type fakePublisher struct {
	mu  sync.Mutex
	ids []string
	err error
}

func (f *fakePublisher) Publish(_ context.Context, subject, id string, _ bus.Envelope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if subject != bus.SubjectAudit {
		return errors.New("wrong subject " + subject)
	}
	if f.err != nil {
		return f.err
	}
	f.ids = append(f.ids, id)
	return nil
}

// TestRecordNeverBlocks proves a full queue drops and counts denials instead of blocking the
// admission answer, and that what was queued is published (UID as message ID) on shutdown.
func TestRecordNeverBlocks(t *testing.T) {
	pub := &fakePublisher{}
	r := NewRecorder(pub, prometheus.NewRegistry(), "admission")
	for i := range DefaultQueue + 5 {
		r.Record(&bus.AdmissionDenial{UID: "uid-" + string(rune('a'+i%26))})
	}
	if n := testutil.ToFloat64(r.results.WithLabelValues("dropped")); n != 5 {
		t.Errorf("dropped = %v; want 5", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(pub.ids) != DefaultQueue {
		t.Errorf("published %d at shutdown; want %d", len(pub.ids), DefaultQueue)
	}
	if diff := cmp.Diff("uid-a", pub.ids[0]); diff != "" {
		t.Errorf("message ID (-want +got):\n%s", diff)
	}
}

// TestPublishFailureIsCountedNotFatal proves a NATS failure is counted and Run goes on.
func TestPublishFailureIsCountedNotFatal(t *testing.T) {
	r := NewRecorder(&fakePublisher{err: errors.New("nats: no responders")}, nil, "admission")
	r.Record(&bus.AdmissionDenial{UID: "u1"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := testutil.ToFloat64(r.results.WithLabelValues("failed")); n != 1 {
		t.Errorf("failed = %v; want 1", n)
	}
}
