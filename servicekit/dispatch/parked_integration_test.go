//go:build integration

package dispatch

import (
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// On nats-server with the chart's permissions, each identity as the binaries connect: an
// operator upgraded over the streams of the release before (no parked stream) keeps the
// command that waited in them; the applier parks a command that keeps failing under its own
// grants; the planner reads the parked stream, sends the command back and removes it, and the
// applier handles it.
func TestParkAndRetryUnderTheIdentities(t *testing.T) {
	srv := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	_, planner := srv.ConnectAs(t, v1alpha1.BinaryPlanner)
	_, applier := srv.ConnectAs(t, v1alpha1.BinaryApplier)
	_, observer := srv.Connect(t) // the test's eyes: no binary may read the commands stream's state

	// The release before: its streams and consumers, and a command waiting in them.
	createOldStreams(t, planner)
	for _, name := range bus.Consumers() {
		if _, err := ensureConsumer(ctxFor(t), planner, name); err != nil {
			t.Fatal(err)
		}
	}
	plannerPub := bus.NewPublisher(planner, v1alpha1.BinaryPlanner)
	publishApply(t, plannerPub, "poison")

	// The upgraded planner's setup adds the parked stream and changes nothing else.
	before := streamConfigs(t, observer, bus.StreamCommands, bus.StreamEvents)
	if _, err := WaitSetup(ctxFor(t), planner, 1); err != nil {
		t.Fatalf("setup over the old streams: %v", err)
	}
	after := streamConfigs(t, observer, bus.StreamCommands, bus.StreamEvents)
	for name, cfg := range before {
		if cfg.MaxMsgs != after[name].MaxMsgs || cfg.MaxAge != after[name].MaxAge || cfg.Retention != after[name].Retention ||
			cfg.Duplicates != after[name].Duplicates || len(cfg.Subjects) != len(after[name].Subjects) {
			t.Errorf("stream %s changed on upgrade: %+v -> %+v", name, cfg, after[name])
		}
	}
	s, err := observer.Stream(ctxFor(t), bus.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctxFor(t)); err != nil || info.State.Msgs != 1 {
		t.Fatalf("commands stream after the upgrade: %+v, %v; want the waiting command", info, err)
	}

	// The applier parks it.
	c, err := WaitBound(ctxFor(t), applier, bus.ConsumerApplier)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var fixed atomic.Bool
	applierPub := bus.NewPublisher(applier, v1alpha1.BinaryApplier)
	runDispatcher(t, &Dispatcher{Consumer: c, ParkAfter: parkAfter, Park: applierPub.PublishMsg, Routes: Routes{
		bus.TypeApplyCommand: rec.handler("applier", func(m *Message) error {
			if fixed.Load() {
				return nil
			}
			return poisonOr(m)
		}),
	}})
	settled(t, observer, c)

	// The planner reads it and sends it back.
	parked := ParkedStream{JS: planner, Publish: plannerPub.PublishMsg}
	st, err := parked.Read(ctxFor(t), 10)
	if err != nil {
		t.Fatalf("read the parked stream as the planner: %v", err)
	}
	if st.Total != 1 || st.Oldest[0].Consumer != bus.ConsumerApplier || st.Oldest[0].Failures != parkAfter {
		t.Fatalf("parked = %+v, want the command after %d failures", st, parkAfter)
	}
	fixed.Store(true) // a person fixed the cause
	if err := parked.Retry(ctxFor(t), st.Oldest[0]); err != nil {
		t.Fatalf("retry as the planner: %v", err)
	}
	settled(t, observer, c)
	if n := len(rec.deliveries()); n != parkAfter+1 {
		t.Errorf("%d handlings, want %d failures and the retry", n, parkAfter)
	}
	if st, err := parked.Read(ctxFor(t), 10); err != nil || st.Total != 0 {
		t.Errorf("parked stream after the retry: %+v, %v; want empty", st, err)
	}
}

func streamConfigs(t *testing.T, js jetstream.JetStream, names ...string) map[string]jetstream.StreamConfig {
	t.Helper()
	out := map[string]jetstream.StreamConfig{}
	for _, n := range names {
		s, err := js.Stream(ctxFor(t), n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = s.CachedInfo().Config
	}
	return out
}
