//go:build chaos || e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts of the command audit.
const (
	// drainTimeout bounds the wait for the applier replicas to finish every queued command
	// (redeliveries of commands held by a process that was killed or paused included).
	drainTimeout = 2 * time.Minute
	fetchWait    = 2 * time.Second
)

// commandsAnswered checks that no command was lost: once the commands work queue is empty
// (every command acknowledged), every step a rollout started has at least one result on the
// events stream, whatever its outcome. A command the applier dropped, or one acknowledged
// without being carried out, leaves its step without one. It returns the violations and the
// number of results read.
func commandsAnswered(ctx context.Context, s *stack.Stack, rollouts []v1alpha1.RuntimeRollout) ([]string, int, error) {
	nc, err := s.ConnectNATS(ctx, "chaos-audit") // the observer: it may read every stream
	if err != nil {
		return nil, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, 0, err
	}
	var (
		pending uint64
		infoErr error // JetStream may still elect a stream leader after the faults
		infos   int
	)
	err = testenv.WaitFor(ctx, drainTimeout, "the commands queue empty", func(ctx context.Context) (bool, error) {
		s, err := js.Stream(ctx, bus.StreamCommands)
		if err != nil {
			infoErr = fmt.Errorf("open the commands stream: %w", err)
			return false, nil
		}
		info, err := s.Info(ctx)
		if err != nil {
			infoErr = fmt.Errorf("the commands stream's state: %w", err)
			return false, nil
		}
		infoErr, pending = nil, info.State.Msgs
		infos++
		return pending == 0, nil
	})
	if err != nil {
		if infos == 0 {
			return nil, 0, fmt.Errorf("the commands stream never answered within %s: %w", drainTimeout, infoErr)
		}
		return []string{fmt.Sprintf("%d commands were still queued %s after the run (last error %v): %v", pending, drainTimeout, infoErr, err)}, 0, nil
	}
	var answered map[string]bool
	read := 0
	var lastErr error
	err = testenv.WaitFor(ctx, drainTimeout, "read the results", func(ctx context.Context) (bool, error) {
		answered, read, lastErr = readResults(ctx, js)
		return lastErr == nil, nil // JetStream may still elect a stream leader after the faults
	})
	if err != nil {
		return nil, read, fmt.Errorf("%w: %w", err, lastErr)
	}
	var violations []string
	for _, ro := range rollouts {
		for _, st := range ro.Status.Steps {
			if st.StartedAt == nil {
				continue
			}
			if id := v1alpha1.StepID(ro.Name, st.Index); !answered[id] {
				violations = append(violations, fmt.Sprintf("step %s (%s %s, %s) was started but no command of it was answered: a lost command", id, st.Action, st.Release, st.State))
			}
		}
	}
	return violations, read, nil
}

// readResults reads every result on the events stream and returns the steps answered
// ("<rollout>/<index>") and the number of results.
func readResults(ctx context.Context, js jetstream.JetStream) (map[string]bool, int, error) {
	s, err := js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return nil, 0, fmt.Errorf("open the events stream: %w", err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectAppliedPattern}})
	if err != nil {
		return nil, 0, fmt.Errorf("read the results: %w", err)
	}
	answered := map[string]bool{}
	read := 0
	for {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			return nil, read, fmt.Errorf("read the results: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var res bus.ApplyResult
			if err := json.Unmarshal(m.Data(), &res); err != nil {
				return nil, read, fmt.Errorf("decode result on %s: %w", m.Subject(), err)
			}
			// The step's ID is <rollout>/<index>; the command ID adds the attempt and the
			// rollout's UID.
			if res.Step.ID != "" {
				answered[res.Step.ID] = true
			}
		}
		if err := batch.Error(); err != nil {
			return nil, read, fmt.Errorf("read the results: %w", err)
		}
		read += n
		if info := cons.CachedInfo(); n == 0 && (info == nil || info.NumPending == 0) {
			return answered, read, nil
		}
	}
}
