package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

// ReadParked reads the parked stream (bus.StreamParked): how many messages it holds and the
// oldest limit of them. A stream that does not exist yet holds nothing.
func ReadParked(ctx context.Context, js jetstream.JetStream, limit int) (bus.ParkedState, error) {
	var st bus.ParkedState
	s, err := js.Stream(ctx, bus.StreamParked)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("stream %s: %w", bus.StreamParked, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return st, fmt.Errorf("stream %s: %w", bus.StreamParked, err)
	}
	st.Total = info.State.Msgs
	// The next stored message from seq on (retried ones leave gaps), one request each.
	for seq := info.State.FirstSeq; len(st.Oldest) < limit && st.Total > 0 && seq <= info.State.LastSeq; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(bus.SubjectParked))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read parked message from %d: %w", seq, err)
		}
		p, err := bus.ParkedFrom(raw.Sequence, raw.Header, raw.Data)
		if err != nil {
			// Not a dispatch loop's: shown with what it lacks, never retried.
			p = &bus.Parked{Seq: raw.Sequence, Subject: raw.Subject, Error: err.Error()}
		}
		st.Oldest = append(st.Oldest, p)
		seq = raw.Sequence + 1
	}
	return st, nil
}

// RetryParked sends the parked message p back to its subject (publish: bus.Publisher.PublishMsg)
// and then removes it from the parked stream. Done twice (stopped in between), the message is
// stored once: its retry carries bus.RetryMsgID. A message that does not say where it came
// from is refused.
func RetryParked(ctx context.Context, js jetstream.JetStream, publish func(context.Context, *nats.Msg) error, p *bus.Parked) error {
	if p.Stream == "" || p.Data == nil {
		return fmt.Errorf("parked message %d cannot be retried: %s", p.Seq, p.Error)
	}
	if err := publish(ctx, p.RetryMsg()); err != nil {
		return fmt.Errorf("send parked message %d back to %s: %w", p.Seq, p.Subject, err)
	}
	s, err := js.Stream(ctx, bus.StreamParked)
	if err != nil {
		return fmt.Errorf("stream %s: %w", bus.StreamParked, err)
	}
	if err := s.DeleteMsg(ctx, p.Seq); err != nil && !gone(err) {
		return fmt.Errorf("remove parked message %d (sent back to %s): %w", p.Seq, p.Subject, err)
	}
	return nil
}

// gone reports whether a delete failed because the message was removed already (a retry
// repeated): nats.go passes JetStream's answer on as text only ("err_code=10057 description=no
// message found").
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrMsgNotFound) ||
		(errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && strings.Contains(err.Error(), "no message found"))
}

// ParkedStream reads and retries the parked stream through JS, sending retries with Publish
// (bus.Publisher.PublishMsg): the planner's, whose identity may.
type ParkedStream struct {
	JS      jetstream.JetStream
	Publish func(context.Context, *nats.Msg) error
}

// Read is ReadParked.
func (p ParkedStream) Read(ctx context.Context, limit int) (bus.ParkedState, error) {
	return ReadParked(ctx, p.JS, limit)
}

// Retry is RetryParked.
func (p ParkedStream) Retry(ctx context.Context, m *bus.Parked) error {
	return RetryParked(ctx, p.JS, p.Publish, m)
}
