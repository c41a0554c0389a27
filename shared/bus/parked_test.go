package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A parked copy says where it came from and why, under its own message ID, and a retry sends
// the original back unchanged but for a message ID JetStream will not drop as a duplicate.
func TestParkAndRetryKeepTheOriginal(t *testing.T) {
	orig := nats.Header{}
	orig.Set(jetstream.MsgIDHeader, "r1/3/1/abcdef12")
	orig.Set("Traceparent", "00-1-2-01")
	data := []byte(`{"type":"ApplyCommand","id":"r1/3/1/abcdef12"}`)
	subject := ApplySubject("cluster", "gpu-operator")

	m := ParkMsg(ConsumerApplier, StreamCommands, 42, subject, orig, data, ParkAfter, errors.New("apply application argocd/gpu-operator:\n admission webhook denied"))
	if m.Subject != "aicr.v1.parked.applier" || string(m.Data) != string(data) {
		t.Fatalf("parked to %s with %q", m.Subject, m.Data)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != "parked/AICR_COMMANDS/42" {
		t.Errorf("parked copy's message ID = %q", got)
	}
	p, err := ParkedFrom(7, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := &Parked{Seq: 7, Subject: subject, Stream: StreamCommands, Consumer: ConsumerApplier, Sequence: 42,
		Failures: ParkAfter, Error: "apply application argocd/gpu-operator: admission webhook denied", MsgID: "r1/3/1/abcdef12",
		Data: data, Header: nats.Header{"Traceparent": {"00-1-2-01"}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("ParkedFrom (-want +got):\n%s", diff)
	}
	r := p.RetryMsg()
	if r.Subject != subject || string(r.Data) != string(data) || r.Header.Get("Traceparent") != "00-1-2-01" ||
		r.Header.Get(jetstream.MsgIDHeader) != "r1/3/1/abcdef12/retry/7" {
		t.Errorf("retry message = %s %q %v", r.Subject, r.Data, r.Header)
	}
}

func TestParkedFromRefusesWhatNoDispatchLoopParked(t *testing.T) {
	good := ParkMsg(ConsumerPlanner, StreamEvents, 1, SubjectEngine, nil, []byte(`{}`), 3, errors.New("x")).Header
	for _, tt := range []struct {
		name, drop, set, value string
	}{
		{"no subject", HeaderParkedSubject, "", ""},
		{"no stream", HeaderParkedStream, "", ""},
		{"a sequence that is no number", "", HeaderParkedSequence, "x"},
		{"failures that are no number", "", HeaderParkedFailures, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			for k, v := range good {
				h[k] = v
			}
			if tt.drop != "" {
				h.Del(tt.drop)
			} else {
				h.Set(tt.set, tt.value)
			}
			if _, err := ParkedFrom(1, h, nil); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// The error is kept on one header line, bounded, and valid UTF-8.
func TestParkedErrorIsOneBoundedLine(t *testing.T) {
	long := strings.Repeat("é", ParkedErrorMax) // two bytes each
	m := ParkMsg(ConsumerApplier, StreamCommands, 1, "s", nil, nil, 1, errors.New("a\r\nb\t"+long))
	got := m.Header.Get(HeaderParkedError)
	if len(got) > ParkedErrorMax || !strings.HasPrefix(got, "a b é") || !strings.HasSuffix(got, "...") || strings.ContainsAny(got, "\r\n\ufffd") {
		t.Errorf("error header = %q (%d bytes)", got, len(got))
	}
}
