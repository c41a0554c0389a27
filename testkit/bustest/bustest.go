// Package bustest holds the one recording publisher of the binaries' unit tests. Each binary
// declares the publisher it needs as its own one-method interface (Publish(ctx, subject, id,
// m)); a Recorder is every one of them, so a test states what was sent (subjects, message IDs,
// messages) instead of each package keeping a fake of its own that checks a little of it. Tests
// that need a real JetStream use natstest.
package bustest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

// Sent is one message a Recorder was asked to publish and kept.
type Sent struct {
	Subject string
	ID      string
	Msg     bus.Envelope
}

// String is the message on one line, for failure messages.
func (s Sent) String() string { return fmt.Sprintf("%s %s %+v", s.Subject, s.ID, s.Msg) }

// Recorder is a publisher that keeps, in order, every message it is asked to publish. It is
// safe for concurrent use; its zero value keeps everything and never fails.
type Recorder struct {
	// Dedupe drops a message whose ID was kept before, as JetStream's duplicate window does:
	// set it where the test proves what a consumer of the subject would see.
	Dedupe bool

	mu      sync.Mutex
	sent    []Sent
	seen    map[string]bool
	err     error
	failAll bool
	failN   int
}

// Publish keeps the message and returns nil, unless FailWith or FailNext says to fail: then it
// keeps nothing and returns their error.
func (r *Recorder) Publish(_ context.Context, subject, id string, m bus.Envelope) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAll || r.failN > 0 {
		r.failN = max(r.failN-1, 0)
		return r.err
	}
	if r.Dedupe {
		if r.seen[id] {
			return nil
		}
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[id] = true
	}
	r.sent = append(r.sent, Sent{Subject: subject, ID: id, Msg: m})
	return nil
}

// FailWith makes every Publish from now on fail with err (as NATS does while it is away);
// FailWith(nil) ends that.
func (r *Recorder) FailWith(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.failAll, r.failN = err, err != nil, 0
}

// FailNext makes the next n calls of Publish fail with err; the ones after succeed.
func (r *Recorder) FailNext(n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.failAll, r.failN = err, false, n
}

// Sent returns what was kept so far, in the order it was published.
func (r *Recorder) Sent() []Sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Sent(nil), r.sent...)
}

// IDs returns the message IDs of what was kept so far, in order.
func (r *Recorder) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.sent))
	for i, s := range r.sent {
		out[i] = s.ID
	}
	return out
}

// Len is how many messages were kept so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// WaitFor waits (servicetest.Eventually) until cond holds of what was kept, and returns what
// it held of; on timeout the test fails with every message kept.
func (r *Recorder) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]Sent) bool) []Sent {
	t.Helper()
	var s []Sent
	saw, sawN := "", -1 // described again only when more was kept
	servicetest.Eventually(t, timeout, what, func() (bool, string) {
		if s = r.Sent(); cond(s) {
			return true, ""
		}
		if len(s) != sawN {
			saw, sawN = fmt.Sprintf("%d messages:\n%s", len(s), Describe(s)), len(s)
		}
		return false, saw
	})
	return s
}

// Of returns the messages of type T among s, in order: Of[*bus.ReleaseVerdict](rec.Sent()).
func Of[T bus.Envelope](s []Sent) []T {
	var out []T
	for _, m := range s {
		if v, ok := m.Msg.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// Describe is one line a message, for failure messages.
func Describe(s []Sent) string {
	var b strings.Builder
	for _, m := range s {
		b.WriteString("  " + m.String() + "\n")
	}
	return b.String()
}
