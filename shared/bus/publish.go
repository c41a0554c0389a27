package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
	if _, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("publish %s to %s: %w", h.Type, subject, err)
	}
	return nil
}
