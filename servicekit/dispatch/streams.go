package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Stream setup belongs to bus.StreamOwner (the planner): it declares the streams and every
// durable consumer (EnsureSetup, WaitSetup). The other binaries only bind: the applier to its
// consumer (WaitBound), the publishers to the events stream (WaitStream). Their NATS identities
// may not create, update or delete either (bus.Permissions).

// EnsureStreams declares the streams; repeating it is harmless (create or update).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for _, cfg := range bus.StreamConfigs(replicas) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("declare stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// EnsureConsumer declares the streams and the named durable consumer and returns it.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.Consumer, error) {
	if err := EnsureStreams(ctx, js, replicas); err != nil {
		return nil, err
	}
	return ensureConsumer(ctx, js, name)
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Consumer, error) {
	stream, cfg, err := bus.ConsumerConfig(name)
	if err != nil {
		return nil, err
	}
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("declare consumer %s on %s: %w", name, stream, err)
	}
	return c, nil
}

// EnsureSetup declares the streams and every durable consumer (bus.Consumers), and returns the
// consumers by name: the stream owner's setup. Repeating it is harmless.
func EnsureSetup(ctx context.Context, js jetstream.JetStream, replicas int) (map[string]jetstream.Consumer, error) {
	if err := EnsureStreams(ctx, js, replicas); err != nil {
		return nil, err
	}
	out := map[string]jetstream.Consumer{}
	for _, name := range bus.Consumers() {
		c, err := ensureConsumer(ctx, js, name)
		if err != nil {
			return nil, err
		}
		out[name] = c
	}
	return out, nil
}

// WaitSetup is EnsureSetup, repeated with backoff until it succeeds or ctx ends: the stream
// owner started before NATS waits for it.
func WaitSetup(ctx context.Context, js jetstream.JetStream, replicas int) (map[string]jetstream.Consumer, error) {
	var out map[string]jetstream.Consumer
	err := retry(ctx, "waiting for jetstream", func() (err error) {
		out, err = EnsureSetup(ctx, js, replicas)
		return err
	})
	return out, err
}

// BindConsumer returns the named durable consumer, which the stream owner declared; it fails
// while the consumer does not exist.
func BindConsumer(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Consumer, error) {
	stream, _, err := bus.ConsumerConfig(name)
	if err != nil {
		return nil, err
	}
	c, err := js.Consumer(ctx, stream, name)
	if err != nil {
		return nil, fmt.Errorf("bind to consumer %s on %s (declared by the %s): %w", name, stream, bus.StreamOwner, err)
	}
	return c, nil
}

// WaitBound is BindConsumer, repeated with backoff until the consumer exists or ctx ends: a
// binary started before NATS or the stream owner waits for them.
func WaitBound(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Consumer, error) {
	var c jetstream.Consumer
	err := retry(ctx, "waiting for the "+bus.StreamOwner+" to declare the consumer", func() (err error) {
		c, err = BindConsumer(ctx, js, name)
		return err
	})
	return c, err
}

// StreamExists is nil once the named stream exists (the stream owner declared it).
func StreamExists(ctx context.Context, js jetstream.JetStream, name string) error {
	if _, err := js.Stream(ctx, name); err != nil {
		return fmt.Errorf("stream %s (declared by the %s): %w", name, bus.StreamOwner, err)
	}
	return nil
}

// WaitStream is StreamExists, repeated with backoff until the stream exists or ctx ends: a
// publisher waits for its stream before the first publication.
func WaitStream(ctx context.Context, js jetstream.JetStream, name string) error {
	return retry(ctx, "waiting for the "+bus.StreamOwner+" to declare the stream", func() error {
		return StreamExists(ctx, js, name)
	})
}

// retry calls f until it succeeds or ctx ends, with capped backoff, logging the first failure
// and every 20th with msg.
func retry(ctx context.Context, msg string, f func() error) error {
	for attempt := uint64(1); ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if attempt == 1 || attempt%20 == 0 {
			logging.From(ctx).Warn().Err(err).Msg(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(Backoff(attempt), 2*time.Second)):
		}
	}
}

// Last returns the newest message stored on subject in stream, decoded as a handler would see
// it, or nil when the stream holds none (never published, or older than the stream's age
// limit). A process whose durable consumer already acknowledged a state report (the planner
// after a restart) reads the current state this way instead of waiting for the next report.
func Last(ctx context.Context, js jetstream.JetStream, stream, subject string) (*Message, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last message on %s in %s: %w", subject, stream, err)
	}
	h, err := header(raw.Data)
	if err != nil {
		return nil, fmt.Errorf("last message on %s in %s (sequence %d): %w", subject, stream, raw.Sequence, err)
	}
	return &Message{Subject: raw.Subject, Type: h.Type, ID: h.ID, Data: raw.Data, Delivered: 1, Sequence: raw.Sequence}, nil
}
