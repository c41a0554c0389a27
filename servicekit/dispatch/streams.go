package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

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

// WaitConsumer is EnsureConsumer, repeated with backoff until it succeeds or ctx ends: a binary
// that starts before NATS waits for it instead of failing.
func WaitConsumer(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.Consumer, error) {
	for attempt := uint64(1); ; attempt++ {
		c, err := EnsureConsumer(ctx, js, name, replicas)
		if err == nil {
			return c, nil
		}
		if attempt == 1 || attempt%20 == 0 {
			logging.From(ctx).Warn().Err(err).Msg("waiting for jetstream")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(Backoff(attempt), 2*time.Second)):
		}
	}
}

// WaitStreams is EnsureStreams, repeated with backoff until it succeeds or ctx ends.
func WaitStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for attempt := uint64(1); ; attempt++ {
		err := EnsureStreams(ctx, js, replicas)
		if err == nil {
			return nil
		}
		if attempt == 1 || attempt%20 == 0 {
			logging.From(ctx).Warn().Err(err).Msg("waiting for jetstream")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(Backoff(attempt), 2*time.Second)):
		}
	}
}
