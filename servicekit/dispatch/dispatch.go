// Package dispatch consumes the JetStream streams a binary reads and hands each message to the
// handler of its type, acknowledging, redelivering or dropping it by what the handler returns.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Message is one delivered message, as a handler sees it.
type Message struct {
	// Subject the message was published to.
	Subject string
	// Type is the Header's type.
	Type string
	// ID is the Header's ID.
	ID string
	// Data is the whole JSON message.
	Data []byte
	// Delivered counts deliveries, from 1.
	Delivered uint64
	// Sequence is the message's sequence number in its stream (0 when unknown): it orders
	// the messages of a stream whatever their senders' clocks say.
	Sequence uint64
}

// Decode unmarshals the message into v (a pointer to the message type).
func (m *Message) Decode(v bus.Envelope) error {
	if err := json.Unmarshal(m.Data, v); err != nil {
		return Terminal(fmt.Errorf("decode %s: %w", m.Type, err))
	}
	return nil
}

// Handler handles one message. Return nil to acknowledge, a NotYet error to redeliver after a
// delay without logging an error, a Terminal error to drop the message for good (logged), and
// any other error to redeliver with backoff (logged as a warning) until it failed
// Dispatcher.ParkAfter times, when it is parked (Dispatcher.Park).
type Handler func(ctx context.Context, m *Message) error

// Routes maps a message type to its handler. A type with no route is acknowledged and counted
// as ignored: a newer sender must not wedge an older receiver.
type Routes map[string]Handler

// terminalError marks an error that redelivery cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as one that redelivery cannot fix: the message is dropped (term).
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err was marked with Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// NotYetError is the "not yet" outcome: the message is redelivered after After, and nothing is
// logged above debug level.
type NotYetError struct {
	// After is the delay before redelivery.
	After time.Duration
	// Why says what the handler waits for.
	Why string
}

func (e *NotYetError) Error() string { return "not yet: " + e.Why }

// NotYet returns a NotYetError.
func NotYet(after time.Duration, format string, args ...any) error {
	return &NotYetError{After: after, Why: fmt.Sprintf(format, args...)}
}

// Backoff returns the redelivery delay for the n-th delivery (1-based): 250ms doubling,
// capped at 30s.
func Backoff(n uint64) time.Duration {
	d := 250 * time.Millisecond
	for i := uint64(1); i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	return d
}

// PullExpiry is how long one pull request of the dispatch loop waits on the server before the
// client issues the next. A pull request lives on the consumer's leader: when that leader
// changes (its NATS node died or was partitioned), the request is gone, and the client notices
// only when the request's idle heartbeats (half the expiry) stop coming for twice their period.
// nats.go's default of 30 s left a consumer idle for that long after such a change; a short
// expiry bounds it to a few seconds at the cost of a pull request every few seconds per binary.
const PullExpiry = 3 * time.Second

// Dispatcher is the one dispatch loop of a binary.
type Dispatcher struct {
	// Consumer to read from.
	Consumer jetstream.Consumer
	// Routes by message type.
	Routes Routes
	// Workers is how many messages are handled at once (1 when zero). Messages of one
	// subject may then be handled out of order; handlers are idempotent and compare state.
	Workers int
	// Metrics, optional.
	Metrics *Metrics
	// Heartbeat is how often a message in hand (handled, or waiting for a free worker) is
	// reported in progress, so JetStream redelivers it only once bus.AckWait passed without
	// one: when this process died or stopped. bus.AckWait/3 when zero.
	Heartbeat time.Duration
	// Park stores the parked copy of a message (bus.ParkMsg) in the parked stream
	// (bus.Publisher.PublishMsg). A message whose handler failed ParkAfter times is parked and
	// taken off the consumer, so it no longer comes back every 30 s forever and a person sees
	// it (the planner's MessagesParked condition). When Park is nil, or fails (a planner older
	// than the parked stream), the message is redelivered with backoff as before.
	Park func(ctx context.Context, m *nats.Msg) error
	// ParkAfter is how many failed handlings park a message (bus.ParkAfter when zero). They
	// are counted by this process: NotYet answers, which JetStream counts as deliveries too,
	// are not failures; with several replicas, or after a restart, a message may fail up to
	// ParkAfter times in each process before it is parked.
	ParkAfter int

	fmu      sync.Mutex
	failures map[uint64]failures // by stream sequence: the messages whose handler failed here
}

// failures counts the failed handlings of one message in this process.
type failures struct {
	n    int
	last time.Time
}

// forgetFailuresAfter drops the count of a message that has not failed here for this long: it
// was handled by another replica, or is no longer delivered.
const forgetFailuresAfter = 15 * time.Minute

// failed counts a failed handling of the message at stream sequence seq and returns how many
// there were in this process.
func (d *Dispatcher) failed(seq uint64) int {
	d.fmu.Lock()
	defer d.fmu.Unlock()
	now := time.Now()
	if d.failures == nil {
		d.failures = map[uint64]failures{}
	}
	for s, f := range d.failures {
		if now.Sub(f.last) > forgetFailuresAfter {
			delete(d.failures, s)
		}
	}
	f := d.failures[seq]
	f.n++
	f.last = now
	d.failures[seq] = f
	return f.n
}

// settled forgets the failures of a message that was acknowledged, dropped or parked.
func (d *Dispatcher) settled(seq uint64) {
	d.fmu.Lock()
	delete(d.failures, seq)
	d.fmu.Unlock()
}

func (d *Dispatcher) parkAfter() int {
	if d.ParkAfter > 0 {
		return d.ParkAfter
	}
	return bus.ParkAfter
}

// Run consumes until ctx is cancelled, then stops consuming, finishes the messages in hand and
// returns nil. The logger comes from ctx.
func (d *Dispatcher) Run(ctx context.Context) error {
	workers := d.Workers
	if workers < 1 {
		workers = 1
	}
	d.Metrics.declare(d.Routes)
	iter, err := d.Consumer.Messages(jetstream.PullMaxMessages(2*workers), jetstream.PullExpiry(PullExpiry))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stopped := make(chan struct{})
	go func() {
		<-ctx.Done()
		iter.Stop()
		close(stopped)
	}()
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	defer wg.Wait()
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return nil
			}
			logging.From(ctx).Warn().Err(err).Msg("read next message")
			continue
		}
		stop := d.keepAlive(msg)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.handle(ctx, msg, stop)
		}()
	}
}

// keepAlive reports msg in progress every Heartbeat until the returned stop is called; stop
// returns once no report can follow.
func (d *Dispatcher) keepAlive(msg jetstream.Msg) (stop func()) {
	every := d.Heartbeat
	if every <= 0 {
		every = bus.AckWait / 3
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress() // lost with the connection: then the message is redelivered
			}
		}
	}()
	return func() { close(done); <-exited }
}

// handle runs the message's handler and answers JetStream. stop ends the message's heartbeat;
// it is called once, before the answer, so no in-progress report follows it.
func (d *Dispatcher) handle(ctx context.Context, msg jetstream.Msg, stop func()) {
	m := &Message{Subject: msg.Subject(), Data: msg.Data(), Delivered: 1}
	var stream, consumer string
	if md, err := msg.Metadata(); err == nil {
		m.Delivered, m.Sequence = md.NumDelivered, md.Sequence.Stream
		stream, consumer = md.Stream, md.Consumer
	}
	log := logging.From(ctx).With().Str(logging.KeySubject, m.Subject).Uint64(logging.KeyDelivered, m.Delivered).Logger()
	h, err := header(m.Data)
	if err != nil {
		stop()
		log.Error().Err(err).Msg("drop undecodable message")
		d.count("unknown", "term", m.Delivered, 0)
		_ = msg.Term()
		return
	}
	m.Type, m.ID = h.Type, h.ID
	log = log.With().Str(logging.KeyMsgType, h.Type).Str(logging.KeyMsgID, h.ID).Logger()
	handler, ok := d.Routes[h.Type]
	if !ok {
		stop()
		log.Debug().Msg("ignore message without a route")
		d.count(h.Type, "ignored", m.Delivered, 0)
		_ = msg.Ack()
		return
	}
	hctx := logging.Into(ctx, log)
	start := time.Now()
	err = safeCall(hctx, handler, m)
	elapsed := time.Since(start)
	stop()
	var notYet *NotYetError
	switch {
	case err == nil:
		if aerr := msg.Ack(); aerr != nil {
			log.Warn().Err(aerr).Msg("acknowledge message")
		}
		d.settled(m.Sequence)
		d.count(h.Type, "ack", m.Delivered, elapsed)
	case errors.As(err, &notYet):
		log.Debug().Str(logging.KeyReason, notYet.Why).Dur(logging.KeyDuration, notYet.After).Msg("redeliver later")
		_ = msg.NakWithDelay(notYet.After)
		d.count(h.Type, "retry", m.Delivered, elapsed)
	case IsTerminal(err):
		log.Error().Err(err).Msg("drop message")
		_ = msg.Term()
		d.settled(m.Sequence)
		d.count(h.Type, "term", m.Delivered, elapsed)
	default:
		if ctx.Err() != nil { // shutting down: let it be redelivered, quietly
			_ = msg.Nak()
			return
		}
		n := d.failed(m.Sequence)
		if d.Park != nil && n >= d.parkAfter() && stream != "" {
			perr := d.Park(ctx, bus.ParkMsg(consumer, stream, m.Sequence, m.Subject, msg.Headers(), m.Data, n, err))
			if perr == nil {
				log.Error().Err(err).Int(logging.KeyFailures, n).Str(logging.KeyParkedTo, bus.ParkedSubject(consumer)).
					Msg("park message: its handling kept failing; kubectl aicr parked --retry sends it back")
				_ = msg.TermWithReason("parked")
				d.settled(m.Sequence)
				d.count(h.Type, "parked", m.Delivered, elapsed)
				return
			}
			log.Warn().Err(perr).Msg("park message, will retry")
		}
		delay := Backoff(uint64(n)) //nolint:gosec // G115: n counts failed handlings, from 1 up
		log.Warn().Err(err).Int(logging.KeyFailures, n).Dur(logging.KeyDuration, delay).Msg("handle message, will retry")
		_ = msg.NakWithDelay(delay)
		d.count(h.Type, "nak", m.Delivered, elapsed)
	}
}

// header decodes the bus.Header every message starts with; one without a type is not a bus
// message.
func header(data []byte) (bus.Header, error) {
	var h bus.Header
	if err := json.Unmarshal(data, &h); err != nil {
		return h, err
	}
	if h.Type == "" {
		return h, errors.New("no message type in its header")
	}
	return h, nil
}

// safeCall turns a handler panic into a retryable error, so one bad message cannot kill the
// binary.
func safeCall(ctx context.Context, h Handler, m *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return h(ctx, m)
}

func (d *Dispatcher) count(typ, result string, delivered uint64, elapsed time.Duration) {
	if d.Metrics == nil {
		return
	}
	d.Metrics.handled.WithLabelValues(typ, result).Inc()
	if delivered > 1 {
		d.Metrics.redelivered.WithLabelValues(typ).Inc()
	}
	if elapsed > 0 {
		d.Metrics.duration.WithLabelValues(typ).Observe(elapsed.Seconds())
	}
}

// LoggerFields adds the identifying fields of common message types to a log context.
func LoggerFields(l zerolog.Context, runtime, release, step string) zerolog.Context {
	return l.Str(logging.KeyRuntime, runtime).Str(logging.KeyRelease, release).Str(logging.KeyStep, step)
}
