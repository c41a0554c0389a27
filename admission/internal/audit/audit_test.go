package audit

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

// TestRecordNeverBlocks proves a full queue drops and counts denials instead of blocking the
// admission answer, and that what was queued is published (UID as message ID) on shutdown.
func TestRecordNeverBlocks(t *testing.T) {
	pub := &bustest.Recorder{}
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
	sent := pub.Sent()
	if len(sent) != DefaultQueue {
		t.Fatalf("published %d at shutdown; want %d", len(sent), DefaultQueue)
	}
	if diff := cmp.Diff("uid-a", sent[0].ID); diff != "" {
		t.Errorf("message ID (-want +got):\n%s", diff)
	}
	for _, m := range sent {
		if m.Subject != bus.SubjectAudit {
			t.Fatalf("published on %s; want %s", m.Subject, bus.SubjectAudit)
		}
	}
}

// TestPublishFailureIsCountedNotFatal proves a NATS failure is counted and Run goes on.
func TestPublishFailureIsCountedNotFatal(t *testing.T) {
	pub := &bustest.Recorder{}
	pub.FailWith(errors.New("nats: no responders"))
	r := NewRecorder(pub, nil, "admission")
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
