package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher sends messages to JetStream, stamping each with its type, time, source and ID.
type Publisher struct {
	js     jetstream.JetStream
	source string
	now    func() time.Time
}

// NewPublisher returns a Publisher for the binary named source.
func NewPublisher(js jetstream.JetStream, source string) *Publisher {
	return &Publisher{js: js, source: source, now: time.Now}
}

// Publish sends m to subject with message ID id (used by JetStream to drop duplicates within
// DuplicateWindow). The ID must be derived from the message's meaning, so that a republish
// after a crash is recognised. It returns once JetStream has stored the message.
func (p *Publisher) Publish(ctx context.Context, subject, id string, m Envelope) error {
	if id == "" {
		return fmt.Errorf("publish %s: a message ID is required", m.MessageType())
	}
	h := m.header()
	h.Type = m.MessageType()
	h.ID = id
	h.Source = p.source
	if h.Time.IsZero() {
		h.Time = p.now().UTC()
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", h.Type, err)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if err := p.publish(ctx, msg); err != nil {
		return fmt.Errorf("publish %s to %s: %w", h.Type, subject, err)
	}
	return nil
}

// PublishMsg sends msg as it is, with Publish's attempts: a parked message (ParkMsg) or one
// sent back from the parked stream (Parked.RetryMsg). Its headers must carry its message ID.
func (p *Publisher) PublishMsg(ctx context.Context, msg *nats.Msg) error {
	if msg.Header.Get(jetstream.MsgIDHeader) == "" {
		return fmt.Errorf("publish to %s: a message ID is required", msg.Subject)
	}
	if err := p.publish(ctx, msg); err != nil {
		return fmt.Errorf("publish to %s: %w", msg.Subject, err)
	}
	return nil
}

// PublishAttempt bounds one attempt of Publish, and PublishTimeout all of them when ctx has no
// deadline of its own. JetStream stores a message when the stream's leader answers: a publish
// that reached a leader which then died or was cut off is never answered, and waiting out one
// long timeout would leave the message unsent for that long after a new leader was elected.
// Publish therefore tries again every PublishAttempt with the same message ID, which JetStream
// stores once.
const (
	PublishAttempt = time.Second
	PublishTimeout = 5 * time.Second
)

// publish tries until JetStream acknowledges data, an attempt fails otherwise than by going
// unanswered, or ctx (PublishTimeout without a deadline) ends.
func (p *Publisher) publish(ctx context.Context, m *nats.Msg) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PublishTimeout)
		defer cancel()
	}
	for {
		actx, cancel := context.WithTimeout(ctx, PublishAttempt)
		msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header} // a new one per attempt
		_, err := p.js.PublishMsg(actx, msg)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if inProcess(err) {
			// An earlier attempt is being stored: its answer went unheard, this one's is coming.
			select {
			case <-ctx.Done():
				return err
			case <-time.After(publishInProcessWait):
			}
			continue
		}
		if !unanswered(err) {
			return err
		}
	}
}

// unanswered reports whether a publish failed for want of an answer (a timeout, no responder:
// no stream leader right now), which another attempt may get.
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// jsErrDuplicateInProcess is JetStream's answer to a message whose ID an earlier publish,
// still being replicated, carries: "duplicate message id is in process".
const jsErrDuplicateInProcess jetstream.ErrorCode = 10158

// publishInProcessWait separates the attempts while an earlier one is being stored.
const publishInProcessWait = 100 * time.Millisecond

func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrDuplicateInProcess
}
