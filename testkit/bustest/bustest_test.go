package bustest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

// TestRecorderKeepsWhatItIsToldToAndFailsWhenAsked proves what the tests that use a Recorder
// rely on: messages kept in order, a repeated ID dropped only with Dedupe, FailNext failing
// exactly n calls and FailWith every call until it is lifted, a failed call keeping nothing.
func TestRecorderKeepsWhatItIsToldToAndFailsWhenAsked(t *testing.T) {
	t.Parallel()
	errAway := errors.New("nats: no responders available for request")
	type call struct {
		id      string
		wantErr bool
	}
	for _, tc := range []struct {
		name    string
		dedupe  bool
		before  func(*Recorder)
		calls   []call
		wantIDs []string
	}{
		{name: "keeps every message in order", calls: []call{{id: "a"}, {id: "b"}, {id: "a"}}, wantIDs: []string{"a", "b", "a"}},
		{name: "Dedupe drops a repeated ID", dedupe: true, calls: []call{{id: "a"}, {id: "b"}, {id: "a"}}, wantIDs: []string{"a", "b"}},
		{name: "FailNext fails n calls, then keeps", before: func(r *Recorder) { r.FailNext(2, errAway) },
			calls: []call{{id: "a", wantErr: true}, {id: "b", wantErr: true}, {id: "c"}}, wantIDs: []string{"c"}},
		{name: "FailWith fails every call", before: func(r *Recorder) { r.FailWith(errAway) },
			calls: []call{{id: "a", wantErr: true}, {id: "b", wantErr: true}, {id: "c", wantErr: true}}},
		{name: "FailWith(nil) lifts it", before: func(r *Recorder) { r.FailWith(errAway); r.FailWith(nil) },
			calls: []call{{id: "a"}}, wantIDs: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &Recorder{Dedupe: tc.dedupe}
			if tc.before != nil {
				tc.before(r)
			}
			for _, c := range tc.calls {
				err := r.Publish(context.Background(), bus.SubjectAudit, c.id, &bus.AdmissionDenial{UID: c.id})
				if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, errAway)) {
					t.Errorf("Publish(%s) = %v; want an error: %v", c.id, err, c.wantErr)
				}
			}
			if got := r.IDs(); !slices.Equal(got, tc.wantIDs) {
				t.Errorf("kept %v; want %v", got, tc.wantIDs)
			}
			if r.Len() != len(tc.wantIDs) {
				t.Errorf("Len() = %d; want %d", r.Len(), len(tc.wantIDs))
			}
		})
	}
}

// TestOfPicksOneMessageType proves Of keeps the messages of one type, in order.
func TestOfPicksOneMessageType(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	ctx := context.Background()
	for _, m := range []bus.Envelope{&bus.ReleaseVerdict{Release: "a"}, &bus.DriftReport{Release: "b"}, &bus.ReleaseVerdict{Release: "c"}} {
		if err := r.Publish(ctx, "s", "id", m); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, v := range Of[*bus.ReleaseVerdict](r.Sent()) {
		got = append(got, v.Release)
	}
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("verdicts of %v; want [a c]", got)
	}
	if s := r.WaitFor(t, 0, "three messages", func(s []Sent) bool { return len(s) == 3 }); len(s) != 3 {
		t.Errorf("WaitFor returned %d messages; want 3", len(s))
	}
}
