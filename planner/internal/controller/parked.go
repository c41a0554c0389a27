package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// ParkedStream is the parked stream (bus.StreamParked) as the planner uses it: what it holds,
// and sending a parked message back to where it came from.
type ParkedStream interface {
	// Read returns how many messages are parked and the oldest limit of them.
	Read(ctx context.Context, limit int) (bus.ParkedState, error)
	// Retry sends p back to its subject and removes it from the parked stream.
	Retry(ctx context.Context, p *bus.Parked) error
}

const (
	// ParkedPoll is how often the planner reads the parked stream: the stream is the state
	// MessagesParked shows, and a poll needs no subscription a message could be lost from.
	ParkedPoll = 5 * time.Second
	// parkedShown is how many parked messages the planner reads for the condition.
	parkedShown = 20
	// parkedRetryBatch is how many parked messages one retry sends back; more are sent by
	// the next one.
	parkedRetryBatch = 1000
)

// Events on the runtime about parked messages.
const (
	EventParkedRetried     = "ParkedRetried"
	EventParkedRetryFailed = "ParkedRetryFailed"
)

// watchParked reads the parked stream every ParkedPoll until ctx ends, and reconciles every
// runtime when what it holds changed (so MessagesParked follows it).
func (c *Controller) watchParked(ctx context.Context) {
	t := c.cfg.Clock.NewTicker(c.cfg.ParkedPoll)
	defer t.Stop()
	for {
		c.refreshParked(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// refreshParked reads the parked stream and, when it holds something else than last read,
// keeps the new state and queues every runtime. A failed read keeps the last state.
func (c *Controller) refreshParked(ctx context.Context) {
	st, err := c.cfg.Parked.Read(ctx, parkedShown)
	if err != nil {
		if ctx.Err() == nil {
			logging.From(ctx).Warn().Err(err).Msg("read the parked stream")
		}
		return
	}
	c.mu.Lock()
	changed := c.parked == nil || !sameParked(*c.parked, st)
	c.parked = &st
	c.mu.Unlock()
	if changed {
		c.enqueueAll()
	}
}

func sameParked(a, b bus.ParkedState) bool {
	return a.Total == b.Total && slices.EqualFunc(a.Oldest, b.Oldest, func(x, y *bus.Parked) bool { return x.Seq == y.Seq })
}

// knownParked is the parked stream as last read (nil: not yet, or no stream to read).
func (c *Controller) knownParked() *bus.ParkedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

// retryParked answers the runtime's AnnotationRetryParked: every parked message is sent back
// to where it came from, then the annotation is removed (a retry repeated after a stop sends
// nothing twice: bus.RetryMsgID). It returns the runtime as written.
func (c *Controller) retryParked(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	asked, ok := rt.Annotations[v1alpha1.AnnotationRetryParked]
	if !ok || c.cfg.Parked == nil {
		return rt, nil
	}
	st, err := c.cfg.Parked.Read(ctx, parkedRetryBatch)
	if err != nil {
		return rt, fmt.Errorf("read the parked stream to retry it: %w", err)
	}
	var sent int
	var failed []string
	for _, p := range st.Oldest {
		if err := c.cfg.Parked.Retry(ctx, p); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		sent++
	}
	log := logging.From(ctx)
	log.Info().Int("sent", sent).Int("failed", len(failed)).Str(v1alpha1.AnnotationRetryParked, asked).Msg("retry parked messages")
	if len(failed) > 0 {
		c.event(ctx, rt, corev1.EventTypeWarning, EventParkedRetryFailed, fmt.Sprintf("%d parked message(s) sent back, %d not: %s", sent, len(failed), failed[0]))
	} else {
		c.event(ctx, rt, corev1.EventTypeNormal, EventParkedRetried, fmt.Sprintf("%d parked message(s) sent back to where they came from", sent))
	}
	c.refreshParked(ctx)
	cur, err := c.updateRuntime(ctx, rt, func(cur *v1alpha1.ClusterRuntime) *v1alpha1.ClusterRuntime {
		if _, ok := cur.Annotations[v1alpha1.AnnotationRetryParked]; !ok {
			return nil
		}
		next := cur.DeepCopy()
		delete(next.Annotations, v1alpha1.AnnotationRetryParked)
		return next
	})
	if err != nil {
		return rt, fmt.Errorf("remove %s from %s: %w", v1alpha1.AnnotationRetryParked, rt.Name, err)
	}
	return cur, nil
}
