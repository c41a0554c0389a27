package refresher

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Publisher sends one message (bus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// Reporter publishes the latest credentials status on bus.SubjectCredentials. Report never
// blocks: a status not yet sent is replaced by a newer one, since only the latest matters to the
// planner. Run sends, retrying with capped backoff while NATS is away.
type Reporter struct {
	// Publisher sends the message.
	Publisher Publisher
	// StreamReady checks, before the first publication, that the events stream exists (the
	// planner declares it: dispatch.StreamExists); optional.
	StreamReady func(ctx context.Context) error
	// Clock times the retries.
	Clock clock.Clock
	// Metrics counts publication failures; optional.
	Metrics *Metrics

	once    sync.Once
	wake    chan struct{}
	mu      sync.Mutex
	pending *report
	lastID  string
}

type report struct {
	id     string
	status bus.CredentialsStatus
}

// Publish timing.
const (
	publishTimeout    = 10 * time.Second
	publishBackoffMin = 250 * time.Millisecond
	publishBackoffMax = 10 * time.Second
)

func (r *Reporter) init() { r.once.Do(func() { r.wake = make(chan struct{}, 1) }) }

// Report queues st under message ID id (derived from the status's meaning). A status whose ID
// was the last one sent is dropped: it says nothing new.
func (r *Reporter) Report(id string, st bus.CredentialsStatus) {
	r.init()
	r.mu.Lock()
	if id == r.lastID {
		r.pending = nil
	} else {
		r.pending = &report{id: id, status: st}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes queued statuses until ctx ends; it returns nil then.
func (r *Reporter) Run(ctx context.Context) error {
	r.init()
	log := logging.From(ctx)
	ensured := r.StreamReady == nil
	failures := 0
	for {
		r.mu.Lock()
		p := r.pending
		r.mu.Unlock()
		if p == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-r.wake:
				continue
			}
		}
		err := func() error {
			pctx, cancel := context.WithTimeout(ctx, publishTimeout)
			defer cancel()
			if !ensured {
				if err := r.StreamReady(pctx); err != nil {
					return err
				}
				ensured = true
			}
			st := p.status // a copy: Publish stamps its header
			return r.Publisher.Publish(pctx, bus.SubjectCredentials, p.id, &st)
		}()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			failures = 0
			r.mu.Lock()
			r.lastID = p.id
			if r.pending == p {
				r.pending = nil
			}
			r.mu.Unlock()
			log.Debug().Str(logging.KeyMsgID, p.id).Msg("published credentials status")
			continue
		}
		failures++
		if r.Metrics != nil {
			r.Metrics.PublishFailures.Inc()
		}
		delay := backoff(failures, publishBackoffMin, publishBackoffMax, nil)
		// our own error text: publish errors hold the subject and NATS's reason, never the status
		if failures == 1 || failures%20 == 0 {
			log.Warn().Err(err).Int("attempt", failures).Dur("retry_in", delay).Msg("publish credentials status failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.Clock.After(delay):
		}
	}
}

// backoff is min·2^(n-1) capped at max, lowered by up to 20% when rnd is set (so replicas and
// restarts spread out) and never above max.
func backoff(n int, minD, maxD time.Duration, rnd func() float64) time.Duration {
	d := minD
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	if rnd != nil {
		d -= time.Duration(float64(d) * 0.2 * rnd())
	}
	return d
}
