package bus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// answers is a JetStream whose Publish gives the results in order, one per attempt (nil: stored;
// errHang: no answer until the attempt's context ends), and records each attempt's message ID.
type answers struct {
	jetstream.JetStream

	mu      sync.Mutex
	results []error
	ids     []string
}

var errHang = errors.New("no answer")

func (a *answers) PublishMsg(ctx context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	a.mu.Lock()
	a.ids = append(a.ids, m.Header.Get(jetstream.MsgIDHeader))
	res := errHang
	if len(a.results) > 0 {
		res, a.results = a.results[0], a.results[1:]
	}
	a.mu.Unlock()
	if errors.Is(res, errHang) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if res != nil {
		return nil, res
	}
	return &jetstream.PubAck{}, nil
}

// A publish that goes unanswered (its stream leader died with it) is tried again with the same
// message ID, so it reaches the next leader; an error that is an answer is returned at once.
func TestPublishTriesAgainWhenUnanswered(t *testing.T) {
	cases := map[string]struct {
		results  []error
		attempts int
		want     string // "" for stored
	}{
		"stored at once": {results: []error{nil}, attempts: 1},
		"unanswered, then stored by the new leader":                      {results: []error{errHang, nil}, attempts: 2},
		"no responders while no leader, then stored":                     {results: []error{nats.ErrNoResponders, jetstream.ErrNoStreamResponse, nil}, attempts: 3},
		"unanswered, then in process: the first attempt is being stored": {results: []error{errHang, &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}, nil}, attempts: 3},
		"an answer that is an error":                                     {results: []error{errors.New("maximum messages exceeded")}, attempts: 1, want: "maximum messages exceeded"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := &answers{results: tc.results}
			err := NewPublisher(js, "planner").Publish(t.Context(), "aicr.v1.cmd.x", "the-id", &EngineStatus{Available: true})
			if tc.want == "" && err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Publish = %v, want an error with %q", err, tc.want)
			}
			if len(js.ids) != tc.attempts {
				t.Errorf("%d attempts, want %d", len(js.ids), tc.attempts)
			}
			for _, id := range js.ids {
				if id != "the-id" {
					t.Errorf("an attempt had message ID %q, want every one the-id", id)
				}
			}
		})
	}
}

// Attempts end with the caller's context.
func TestPublishGivesUpWithItsContext(t *testing.T) {
	js := &answers{}
	ctx, cancel := context.WithTimeout(t.Context(), PublishAttempt+PublishAttempt/2)
	defer cancel()
	err := NewPublisher(js, "planner").Publish(ctx, "aicr.v1.cmd.x", "the-id", &EngineStatus{Available: true})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish = %v, want the deadline exceeded", err)
	}
	if len(js.ids) != 2 {
		t.Errorf("%d attempts in 1.5 attempts' time, want 2", len(js.ids))
	}
}
