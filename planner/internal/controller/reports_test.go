package controller

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// reportMessage is m as the dispatcher hands it to a handler.
func reportMessage(t *testing.T, typ string, m bus.Envelope) *dispatch.Message {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &dispatch.Message{Type: typ, ID: typ, Data: data}
}

// An engine or credentials report earlier in the stream than the one held changes nothing,
// whatever its sender's clock said: the newest report Restore read at start is not undone by
// the consumer redelivering an older one.
func TestAnOlderReportDoesNotReplaceANewerOne(t *testing.T) {
	c := New(Config{Name: "planner", Namespace: "aicr-system"}, &memStore{}, &countingPublisher{})
	defer c.queue.ShutDown()
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	engine := func(seq uint64, at time.Time, available bool) *dispatch.Message {
		reason := v1alpha1.ReasonEngineMissing
		if available {
			reason = v1alpha1.ReasonEngineAvailable
		}
		m := reportMessage(t, bus.TypeEngineStatus, &bus.EngineStatus{Header: bus.Header{Type: bus.TypeEngineStatus, Time: at}, Available: available, Reason: reason})
		m.Sequence = seq
		return m
	}
	for i, step := range []struct {
		msg  *dispatch.Message
		want bool
	}{
		{engine(5, t0, true), true},
		{engine(3, t0.Add(time.Hour), false), true},   // earlier in the stream, a later clock: dropped
		{engine(5, t0, true), true},                   // the same message again
		{engine(8, t0.Add(-time.Hour), false), false}, // later in the stream, an earlier clock: taken
		{engine(0, t0, true), true},                   // sequence unknown: taken
	} {
		if err := c.handleEngine(ctx, step.msg); err != nil {
			t.Fatal(err)
		}
		if got := c.engine.Available; got != step.want {
			t.Fatalf("report %d (sequence %d): available %v, want %v", i+1, step.msg.Sequence, got, step.want)
		}
	}
	creds := func(seq uint64, ok bool) *dispatch.Message {
		m := reportMessage(t, bus.TypeCredentialsStatus, &bus.CredentialsStatus{Header: bus.Header{Type: bus.TypeCredentialsStatus}, Mode: "aws", OK: ok})
		m.Sequence = seq
		return m
	}
	for i, step := range []struct {
		msg  *dispatch.Message
		want bool
	}{{creds(10, true), true}, {creds(9, false), true}, {creds(11, false), false}} {
		if err := c.handleCredentials(ctx, step.msg); err != nil {
			t.Fatal(err)
		}
		if c.creds.OK != step.want {
			t.Fatalf("credentials report %d: OK %v, want %v", i+1, c.creds.OK, step.want)
		}
	}
}

// Restore takes the newest report of each subject, and one it cannot read does not keep it
// from the others.
func TestRestoreTakesTheNewestReports(t *testing.T) {
	c := New(Config{Name: "planner", Namespace: "aicr-system"}, &memStore{}, &countingPublisher{})
	defer c.queue.ShutDown()
	asked := map[string]bool{}
	c.Restore(context.Background(), func(_ context.Context, subject string) (*dispatch.Message, error) {
		asked[subject] = true
		if subject == bus.SubjectEngine {
			return nil, errors.New("nats: timeout")
		}
		return reportMessage(t, bus.TypeCredentialsStatus, &bus.CredentialsStatus{Mode: "static", OK: true}), nil
	})
	if !asked[bus.SubjectEngine] || !asked[bus.SubjectCredentials] {
		t.Errorf("asked for %v, want both report subjects", asked)
	}
	if c.engine != nil {
		t.Errorf("engine %+v after a failed read, want none (the next report)", c.engine)
	}
	if c.creds == nil || !c.creds.OK || c.creds.Mode != "static" {
		t.Errorf("credentials %+v, want the restored report", c.creds)
	}
	c2 := New(Config{Name: "planner", Namespace: "aicr-system"}, &memStore{}, &countingPublisher{})
	defer c2.queue.ShutDown()
	c2.Restore(context.Background(), func(context.Context, string) (*dispatch.Message, error) { return nil, nil })
	if c2.engine != nil || c2.creds != nil {
		t.Errorf("with nothing on the bus: engine %+v, credentials %+v; want none", c2.engine, c2.creds)
	}
}
