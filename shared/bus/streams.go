package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/shared/logging"
)

// Streams and durable consumers.
const (
	// StreamCommands is the work queue of commands: a message is removed once acknowledged.
	StreamCommands = "AICR_COMMANDS"
	// StreamEvents keeps events for EventsMaxAge.
	StreamEvents = "AICR_EVENTS"
	// ConsumerApplier is the applier replicas' shared durable consumer on StreamCommands.
	ConsumerApplier = "applier"
	// ConsumerPlanner is the planner's durable consumer on StreamEvents.
	ConsumerPlanner = "planner"

	// DuplicateWindow is how long JetStream remembers message IDs.
	DuplicateWindow = 2 * time.Hour
	// EventsMaxAge is how long events are kept.
	EventsMaxAge = 24 * time.Hour
	// AckWait is how long a delivered message may stay unacknowledged before redelivery.
	AckWait = 30 * time.Second
)

// StreamConfig returns the configuration of the commands and events streams. replicas is the
// JetStream replication factor (1 for a single server).
func StreamConfigs(replicas int) []jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	return []jetstream.StreamConfig{
		{
			Name:        StreamCommands,
			Description: "aicr-operator commands, planner to applier (work queue)",
			Subjects:    []string{SubjectCommands},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  DuplicateWindow,
			Discard:     jetstream.DiscardOld,
		},
		{
			Name:        StreamEvents,
			Description: "aicr-operator events to the planner",
			Subjects:    []string{SubjectEvents},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  DuplicateWindow,
			MaxAge:      EventsMaxAge,
			Discard:     jetstream.DiscardOld,
		},
	}
}

// ConsumerConfig returns the durable consumer configuration for name (ConsumerApplier or
// ConsumerPlanner).
func ConsumerConfig(name string) (stream string, cfg jetstream.ConsumerConfig, err error) {
	base := jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1024,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	switch name {
	case ConsumerApplier:
		base.Description = "applier replicas share this work queue"
		base.FilterSubjects = []string{SubjectApplyPattern, SubjectRemovePattern}
		return StreamCommands, base, nil
	case ConsumerPlanner:
		base.Description = "planner consumes every event"
		base.FilterSubject = SubjectEvents
		return StreamEvents, base, nil
	default:
		return "", jetstream.ConsumerConfig{}, fmt.Errorf("unknown consumer %q", name)
	}
}

// EnsureStreams declares the streams; repeating it is harmless (create or update).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for _, cfg := range StreamConfigs(replicas) {
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
	stream, cfg, err := ConsumerConfig(name)
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
