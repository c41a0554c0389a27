package bus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Streams and durable consumers.
const (
	// StreamCommands is the work queue of commands: a message is removed once acknowledged.
	StreamCommands = "AICR_COMMANDS"
	// StreamEvents keeps events for EventsMaxAge.
	StreamEvents = "AICR_EVENTS"
	// ConsumerApplier is the applier replicas' shared durable consumer on StreamCommands.
	ConsumerApplier = v1alpha1.BinaryApplier
	// ConsumerPlanner is the planner's durable consumer on StreamEvents.
	ConsumerPlanner = v1alpha1.BinaryPlanner

	// DuplicateWindow is how long JetStream remembers message IDs.
	DuplicateWindow = 2 * time.Hour
	// EventsMaxAge is how long events are kept.
	EventsMaxAge = 24 * time.Hour
	// AckWait is how long a delivered message may go without an acknowledgement or an
	// in-progress report before JetStream delivers it again. A process reports the messages it
	// holds in progress every AckWait/3 while it works on them (servicekit/dispatch), so only a
	// process that died, stopped or lost its connection makes a message wait this long: another
	// replica, or the restarted process, then gets it within seconds.
	AckWait = 3 * time.Second
)

// StreamConfigs returns the configuration of the commands, events and parked streams. A stream
// added here is created by the planner's next start beside the ones that exist (an upgrade);
// a change to an existing stream must be one JetStream accepts as an update. replicas is the
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
		{
			Name:        StreamParked,
			Description: "aicr-operator messages whose handling kept failing, until retried (kubectl aicr parked --retry)",
			Subjects:    []string{SubjectParked},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			Duplicates:  DuplicateWindow,
			MaxAge:      ParkedMaxAge,
			MaxMsgs:     ParkedMaxMsgs,
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
