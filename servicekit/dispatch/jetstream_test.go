package dispatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// planDigest is the digest the test commands carry.
const planDigest = "sha256:f7bf555e994826e3c903a34921056aee4c829088bf277a390a09a8a38e135387"

// waitTimeout bounds every wait for JetStream state in these tests.
const waitTimeout = 15 * time.Second

// eventually is servicetest.Eventually with these tests' waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	servicetest.Eventually(t, waitTimeout, what, cond)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// delivery is one handler call as a test handler records it.
type delivery struct {
	id        string
	typ       string
	delivered uint64
	seq       uint64
	at        time.Time
	worker    string
}

// recorder records deliveries; its handler returns what outcome says for each delivery.
type recorder struct {
	mu  sync.Mutex
	got []delivery
}

func (r *recorder) handler(worker string, outcome func(m *Message) error) Handler {
	return func(_ context.Context, m *Message) error {
		r.mu.Lock()
		r.got = append(r.got, delivery{id: m.ID, typ: m.Type, delivered: m.Delivered, seq: m.Sequence, at: time.Now(), worker: worker})
		r.mu.Unlock()
		return outcome(m)
	}
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// runDispatcher runs d until the test ends and checks that Run then returns nil.
func runDispatcher(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Dispatcher.Run returned %v after cancel, want nil", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Dispatcher.Run did not return within %s of cancel", waitTimeout)
		}
	})
}

func applyCommand(release string) *bus.ApplyCommand {
	return bus.NewApplyCommand("cluster", "uid-1", bus.StepRef{Rollout: "cluster-1", Index: 1, ID: "cluster-1/1"}, release,
		v1alpha1.ActionInstall, planDigest, false, nil)
}

// settled waits until the consumer has nothing pending or unacknowledged and the work queue
// holds no message: nothing is left that could be delivered again.
func settled(t *testing.T, js jetstream.JetStream, c jetstream.Consumer) {
	t.Helper()
	eventually(t, "the applier consumer to settle", func() (bool, string) {
		ci, err := c.Info(ctxFor(t))
		if err != nil {
			return false, err.Error()
		}
		s, err := js.Stream(ctxFor(t), bus.StreamCommands)
		if err != nil {
			return false, err.Error()
		}
		si, err := s.Info(ctxFor(t))
		if err != nil {
			return false, err.Error()
		}
		return ci.NumPending == 0 && ci.NumAckPending == 0 && si.State.Msgs == 0,
			fmt.Sprintf("pending %d, ack pending %d, stored %d", ci.NumPending, ci.NumAckPending, si.State.Msgs)
	})
}

func TestEnsureStreamsIsIdempotent(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	for i := range 2 {
		if err := EnsureStreams(ctxFor(t), js, 1); err != nil {
			t.Fatalf("EnsureStreams #%d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if _, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1); err != nil {
			t.Fatalf("EnsureConsumer(applier) #%d: %v", i+1, err)
		}
		if _, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerPlanner, 1); err != nil {
			t.Fatalf("EnsureConsumer(planner) #%d: %v", i+1, err)
		}
	}
	s, err := js.Stream(ctxFor(t), bus.StreamCommands)
	if err != nil {
		t.Fatalf("stream %s: %v", bus.StreamCommands, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Retention != jetstream.WorkQueuePolicy || cfg.Duplicates != bus.DuplicateWindow || cfg.Storage != jetstream.FileStorage {
		t.Errorf("commands stream: retention %v, duplicates %v, storage %v; want work queue, %v, file", cfg.Retention, cfg.Duplicates, cfg.Storage, bus.DuplicateWindow)
	}
	if _, err := EnsureConsumer(ctxFor(t), js, "auditor", 1); err == nil {
		t.Errorf("EnsureConsumer accepted an unknown consumer name")
	}
}

// TestCommandsAreAWorkQueue proves two applier replicas share the durable consumer: every
// command is handled exactly once, by one of them, and leaves the stream when acknowledged.
func TestCommandsAreAWorkQueue(t *testing.T) {
	srv := natstest.Start(t)
	_, js1 := srv.Connect(t)
	_, js2 := srv.Connect(t)
	rec := &recorder{}
	for i, js := range []jetstream.JetStream{js1, js2} {
		c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
		if err != nil {
			t.Fatalf("EnsureConsumer: %v", err)
		}
		ok := func(*Message) error { return nil }
		worker := fmt.Sprintf("replica-%d", i)
		runDispatcher(t, &Dispatcher{Consumer: c, Workers: 2, Routes: Routes{
			bus.TypeApplyCommand:  rec.handler(worker, ok),
			bus.TypeRemoveCommand: rec.handler(worker, ok),
		}})
	}
	pub := bus.NewPublisher(js1, "planner")
	const n = 40
	for i := range n {
		release := fmt.Sprintf("r%02d", i)
		var err error
		if i%4 == 0 {
			err = pub.Publish(ctxFor(t), bus.RemoveSubject("cluster", release), "remove/"+release, &bus.RemoveCommand{Runtime: "cluster", Release: release})
		} else {
			err = pub.Publish(ctxFor(t), bus.ApplySubject("cluster", release), "apply/"+release, applyCommand(release))
		}
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	c, err := js1.Consumer(ctxFor(t), bus.StreamCommands, bus.ConsumerApplier)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	settled(t, js1, c)
	perID := map[string]int{}
	for _, d := range rec.deliveries() {
		perID[d.id]++
	}
	if len(perID) != n {
		t.Errorf("%d distinct commands handled, want %d", len(perID), n)
	}
	for id, count := range perID {
		if count != 1 {
			t.Errorf("command %s handled %d times, want once", id, count)
		}
	}
}

// TestDuplicateMessageIDsAreDropped proves a republish with the same message ID (a planner
// that crashed after publishing) stores nothing new within the duplicate window.
func TestDuplicateMessageIDsAreDropped(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	if err := EnsureStreams(ctxFor(t), js, 1); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	pub := bus.NewPublisher(js, "planner")
	subject := bus.ApplySubject("cluster", "gpu-operator")
	for range 3 {
		if err := pub.Publish(ctxFor(t), subject, "cluster-1/1/1", applyCommand("gpu-operator")); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if err := pub.Publish(ctxFor(t), subject, "cluster-1/1/2", applyCommand("gpu-operator")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	s, err := js.Stream(ctxFor(t), bus.StreamCommands)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(ctxFor(t))
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("stream holds %d messages, want 2 (three publishes of one ID, one of another)", info.State.Msgs)
	}
	if err := pub.Publish(ctxFor(t), subject, "", applyCommand("gpu-operator")); err == nil {
		t.Errorf("Publish without a message ID succeeded")
	}
}

// TestDispatcherOutcomes proves how the one dispatch loop answers each handler outcome.
func TestDispatcherOutcomes(t *testing.T) {
	type setup struct {
		js   jetstream.JetStream
		c    jetstream.Consumer
		rec  *recorder
		pub  *bus.Publisher
		reg  *prometheus.Registry
		mets *Metrics
	}
	start := func(t *testing.T, outcome func(m *Message) error) setup {
		srv := natstest.Start(t)
		_, js := srv.Connect(t)
		c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
		if err != nil {
			t.Fatalf("EnsureConsumer: %v", err)
		}
		s := setup{js: js, c: c, rec: &recorder{}, pub: bus.NewPublisher(js, "planner"), reg: prometheus.NewRegistry()}
		s.mets = NewMetrics(s.reg, "test")
		runDispatcher(t, &Dispatcher{Consumer: c, Metrics: s.mets, Routes: Routes{bus.TypeApplyCommand: s.rec.handler("applier", outcome)}})
		return s
	}
	publish := func(t *testing.T, s setup, id string) {
		t.Helper()
		if err := s.pub.Publish(ctxFor(t), bus.ApplySubject("cluster", "gpu-operator"), id, applyCommand("gpu-operator")); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	count := func(s setup, typ, result string) float64 {
		return testutil.ToFloat64(s.mets.handled.WithLabelValues(typ, result))
	}
	waitDeliveries := func(t *testing.T, s setup, n int) []delivery {
		t.Helper()
		eventually(t, fmt.Sprintf("%d deliveries", n), func() (bool, string) {
			got := s.rec.deliveries()
			return len(got) >= n, fmt.Sprintf("%d", len(got))
		})
		return s.rec.deliveries()
	}

	t.Run("nil acknowledges", func(t *testing.T) {
		s := start(t, func(*Message) error { return nil })
		publish(t, s, "m1")
		settled(t, s.js, s.c)
		got := s.rec.deliveries()
		if len(got) != 1 || got[0].delivered != 1 || got[0].id != "m1" || got[0].typ != bus.TypeApplyCommand {
			t.Errorf("deliveries = %+v, want m1 once", got)
		}
		if v := count(s, bus.TypeApplyCommand, "ack"); v != 1 {
			t.Errorf("ack count = %v, want 1", v)
		}
	})

	t.Run("NotYet redelivers after its delay", func(t *testing.T) {
		const after = 400 * time.Millisecond
		s := start(t, func(m *Message) error {
			if m.Delivered == 1 {
				return NotYet(after, "the Application is being deleted")
			}
			return nil
		})
		publish(t, s, "m1")
		got := waitDeliveries(t, s, 2)
		settled(t, s.js, s.c)
		if got[1].delivered != 2 {
			t.Errorf("second delivery has Delivered = %d, want 2", got[1].delivered)
		}
		// A lower bound only: JetStream may redeliver later than asked, never sooner.
		if gap := got[1].at.Sub(got[0].at); gap < after-50*time.Millisecond {
			t.Errorf("redelivered after %s, want at least %s", gap, after)
		}
		if r, a := count(s, bus.TypeApplyCommand, "retry"), count(s, bus.TypeApplyCommand, "ack"); r != 1 || a != 1 {
			t.Errorf("retry, ack counts = %v, %v; want 1, 1", r, a)
		}
		if n := len(s.rec.deliveries()); n != 2 {
			t.Errorf("%d deliveries, want 2", n)
		}
	})

	t.Run("Terminal drops the message for good", func(t *testing.T) {
		s := start(t, func(*Message) error { return Terminal(errors.New("plan sha256:00 does not exist")) })
		publish(t, s, "m1")
		waitDeliveries(t, s, 1)
		settled(t, s.js, s.c)
		ci, err := s.c.Info(ctxFor(t))
		if err != nil {
			t.Fatalf("consumer info: %v", err)
		}
		if ci.NumRedelivered != 0 {
			t.Errorf("NumRedelivered = %d, want 0", ci.NumRedelivered)
		}
		if n := len(s.rec.deliveries()); n != 1 {
			t.Errorf("%d deliveries, want 1", n)
		}
		if v := count(s, bus.TypeApplyCommand, "term"); v != 1 {
			t.Errorf("term count = %v, want 1", v)
		}
	})

	t.Run("a handler panic is recovered and the message redelivered", func(t *testing.T) {
		s := start(t, func(m *Message) error {
			if m.Delivered == 1 {
				panic("nil map")
			}
			return nil
		})
		publish(t, s, "m1")
		got := waitDeliveries(t, s, 2)
		settled(t, s.js, s.c)
		if got[1].delivered != 2 {
			t.Errorf("second delivery has Delivered = %d, want 2", got[1].delivered)
		}
		if n, a := count(s, bus.TypeApplyCommand, "nak"), count(s, bus.TypeApplyCommand, "ack"); n != 1 || a != 1 {
			t.Errorf("nak, ack counts = %v, %v; want 1, 1", n, a)
		}
	})

	t.Run("an ordinary error is redelivered with backoff", func(t *testing.T) {
		s := start(t, func(m *Message) error {
			if m.Delivered == 1 {
				return errors.New("apiserver: connection refused")
			}
			return nil
		})
		publish(t, s, "m1")
		got := waitDeliveries(t, s, 2)
		settled(t, s.js, s.c)
		if gap := got[1].at.Sub(got[0].at); gap < Backoff(1)-50*time.Millisecond {
			t.Errorf("redelivered after %s, want at least %s", gap, Backoff(1))
		}
	})

	t.Run("a message type without a route is acknowledged and ignored", func(t *testing.T) {
		s := start(t, func(m *Message) error {
			t.Errorf("handler called for %s", m.Type)
			return nil
		})
		if _, err := s.js.Publish(ctxFor(t), bus.ApplySubject("cluster", "x"), []byte(`{"type":"aicr.v2.ApplyCommand","id":"future-1"}`)); err != nil {
			t.Fatalf("publish: %v", err)
		}
		settled(t, s.js, s.c)
		if v := count(s, "aicr.v2.ApplyCommand", "ignored"); v != 1 {
			t.Errorf("ignored count = %v, want 1", v)
		}
	})

	t.Run("an undecodable message is dropped", func(t *testing.T) {
		s := start(t, func(m *Message) error {
			t.Errorf("handler called for %s", m.Type)
			return nil
		})
		for i, data := range []string{`not json`, `{"id":"no type"}`} {
			if _, err := s.js.Publish(ctxFor(t), bus.ApplySubject("cluster", fmt.Sprint(i)), []byte(data)); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		settled(t, s.js, s.c)
		if v := count(s, "unknown", "term"); v != 2 {
			t.Errorf("term count of undecodable messages = %v, want 2", v)
		}
	})
}

// TestRestartLosesNothing proves that what JetStream acknowledged survives a NATS restart:
// commands and events published before it are all delivered after it.
func TestRestartLosesNothing(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	if err := EnsureStreams(ctxFor(t), js, 1); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	pub := bus.NewPublisher(js, "planner")
	want := map[string]bool{}
	for i := range 10 {
		id := fmt.Sprintf("cmd-%d", i)
		if err := pub.Publish(ctxFor(t), bus.ApplySubject("cluster", fmt.Sprintf("r%d", i)), id, applyCommand("r")); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		want[id] = true
	}
	for i := range 5 {
		id := fmt.Sprintf("evt-%d", i)
		if err := pub.Publish(ctxFor(t), bus.SubjectEngine, id, &bus.EngineStatus{Available: true, Reason: v1alpha1.ReasonEngineAvailable}); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		want[id] = true
	}

	srv.Restart()
	eventually(t, "the client to reconnect", func() (bool, string) { return nc.IsConnected(), nc.Status().String() })

	if err := pub.Publish(ctxFor(t), bus.SubjectEngine, "evt-after", &bus.EngineStatus{Available: true, Reason: v1alpha1.ReasonEngineAvailable}); err != nil {
		t.Fatalf("Publish after restart: %v", err)
	}
	want["evt-after"] = true
	rec := &recorder{}
	ok := func(*Message) error { return nil }
	consumers, err := WaitSetup(ctxFor(t), js, 1)
	if err != nil {
		t.Fatalf("WaitSetup: %v", err)
	}
	for name, c := range consumers {
		runDispatcher(t, &Dispatcher{Consumer: c, Routes: Routes{bus.TypeApplyCommand: rec.handler(name, ok), bus.TypeEngineStatus: rec.handler(name, ok)}})
	}
	eventually(t, "every message published before the restart", func() (bool, string) {
		got := map[string]bool{}
		for _, d := range rec.deliveries() {
			got[d.id] = true
		}
		for id := range want {
			if !got[id] {
				return false, fmt.Sprintf("%d of %d, missing %s", len(got), len(want), id)
			}
		}
		return true, ""
	})
}

// TestOnlyTheStreamOwnerDeclares proves the setup split under the bus's identities, on a server
// that requires TLS: the applier's WaitBound and the readiness identity's WaitStream wait until
// the planner's WaitSetup has declared the streams and consumers, then bind, and a command the
// planner publishes reaches the applier through the bound consumer.
func TestOnlyTheStreamOwnerDeclares(t *testing.T) {
	srv := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	_, planner := srv.ConnectAs(t, v1alpha1.BinaryPlanner)
	_, applier := srv.ConnectAs(t, v1alpha1.BinaryApplier)
	_, readiness := srv.ConnectAs(t, v1alpha1.BinaryReadiness)

	bound := make(chan jetstream.Consumer, 1)
	streamed := make(chan error, 1)
	go func() {
		c, err := WaitBound(ctxFor(t), applier, bus.ConsumerApplier)
		if err != nil {
			t.Errorf("WaitBound: %v", err)
		}
		bound <- c
	}()
	go func() { streamed <- WaitStream(ctxFor(t), readiness, bus.StreamEvents) }()
	if err := StreamExists(ctxFor(t), readiness, bus.StreamEvents); err == nil {
		t.Fatal("the events stream exists before the planner declared it")
	}
	if _, err := BindConsumer(ctxFor(t), applier, bus.ConsumerApplier); err == nil {
		t.Fatal("the applier bound to a consumer nobody declared")
	}

	if _, err := WaitSetup(ctxFor(t), planner, 1); err != nil {
		t.Fatalf("the planner's WaitSetup: %v", err)
	}
	if err := <-streamed; err != nil {
		t.Fatalf("WaitStream: %v", err)
	}
	c := <-bound
	if c == nil {
		t.FailNow()
	}
	if err := bus.NewPublisher(planner, "planner").Publish(ctxFor(t), bus.ApplySubject("cluster", "nfd"), "c1", applyCommand("nfd")); err != nil {
		t.Fatalf("the planner publishes a command: %v", err)
	}
	rec := &recorder{}
	runDispatcher(t, &Dispatcher{Consumer: c, Routes: Routes{bus.TypeApplyCommand: rec.handler("applier", func(*Message) error { return nil })}})
	eventually(t, "the applier to handle the command", func() (bool, string) {
		return len(rec.deliveries()) == 1, fmt.Sprintf("%d deliveries", len(rec.deliveries()))
	})
	if d := rec.deliveries()[0]; d.seq != 1 {
		t.Errorf("the handler saw stream sequence %d, want 1 (the stream's first message)", d.seq)
	}
}

// shortAckConsumer declares the applier consumer as bus.ConsumerConfig does, with a short
// AckWait, so the tests see redeliveries within a second.
func shortAckConsumer(t *testing.T, js jetstream.JetStream, ackWait time.Duration) jetstream.Consumer {
	t.Helper()
	if err := EnsureStreams(ctxFor(t), js, 1); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	stream, cfg, err := bus.ConsumerConfig(bus.ConsumerApplier)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AckWait = ackWait
	c, err := js.CreateOrUpdateConsumer(ctxFor(t), stream, cfg)
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return c
}

// TestHeartbeatKeepsALongHandlerItsMessage proves a message whose handler works for several
// AckWaits is delivered once: the dispatch loop reports it in progress meanwhile.
func TestHeartbeatKeepsALongHandlerItsMessage(t *testing.T) {
	const ackWait = 500 * time.Millisecond
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	c := shortAckConsumer(t, js, ackWait)
	rec := &recorder{}
	work := func(*Message) error { time.Sleep(4 * ackWait); return nil }
	runDispatcher(t, &Dispatcher{Consumer: c, Workers: 1, Heartbeat: ackWait / 3, Routes: Routes{bus.TypeApplyCommand: rec.handler("applier", work)}})
	// A second message waits for the one worker for as long: it is reported in progress too.
	for _, id := range []string{"m1", "m2"} {
		if err := bus.NewPublisher(js, "planner").Publish(ctxFor(t), bus.ApplySubject("cluster", id), id, applyCommand(id)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	settled(t, js, c)
	for _, d := range rec.deliveries() {
		if d.delivered != 1 {
			t.Errorf("%s delivered %d times while its handler worked, want once", d.id, d.delivered)
		}
	}
	if n := len(rec.deliveries()); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}
}

// TestMessageOfADeadReplicaGoesToTheOther proves a message held by a replica whose connection
// died mid-handling (a killed process) is delivered to the other replica once AckWait passes
// without a heartbeat, not after the handler would have finished.
func TestMessageOfADeadReplicaGoesToTheOther(t *testing.T) {
	const ackWait = 500 * time.Millisecond
	srv := natstest.Start(t)
	ncDead, jsDead := srv.Connect(t)
	_, jsAlive := srv.Connect(t)
	rec := &recorder{}
	held := make(chan struct{})
	hang := func(*Message) error {
		close(held)
		select {} // the process is gone: it never answers
	}
	dead := shortAckConsumer(t, jsDead, ackWait)
	runDispatcherUntil(t, &Dispatcher{Consumer: dead, Workers: 1, Heartbeat: ackWait / 3, Routes: Routes{bus.TypeApplyCommand: rec.handler("dead", hang)}})
	if err := bus.NewPublisher(jsAlive, "planner").Publish(ctxFor(t), bus.ApplySubject("cluster", "a"), "m1", applyCommand("a")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatal("the first replica never got the message")
	}
	ncDead.Close()
	alive := shortAckConsumer(t, jsAlive, ackWait)
	runDispatcher(t, &Dispatcher{Consumer: alive, Workers: 1, Heartbeat: ackWait / 3, Routes: Routes{bus.TypeApplyCommand: rec.handler("alive", func(*Message) error { return nil })}})
	settled(t, jsAlive, alive)
	got := rec.deliveries()
	if len(got) != 2 || got[0].worker != "dead" || got[1].worker != "alive" || got[1].delivered != 2 {
		t.Errorf("deliveries %+v, want the dead replica's, then the other's (delivery 2)", got)
	}
}

// runDispatcherUntil runs d for a replica whose handler never returns: Run is left behind at
// the end of the test, as a killed process leaves its work.
func runDispatcherUntil(t *testing.T, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = d.Run(ctx) }()
}

// TestLastReadsTheNewestReportUnderThePlannersGrants proves a restarted planner can read the
// current engine state with its own NATS identity: the newest message on the subject, and nil
// for a subject nothing was published on.
func TestLastReadsTheNewestReportUnderThePlannersGrants(t *testing.T) {
	srv := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	_, planner := srv.ConnectAs(t, v1alpha1.BinaryPlanner)
	_, readiness := srv.ConnectAs(t, v1alpha1.BinaryReadiness)
	if _, err := WaitSetup(ctxFor(t), planner, 1); err != nil {
		t.Fatalf("the planner's WaitSetup: %v", err)
	}
	if m, err := Last(ctxFor(t), planner, bus.StreamEvents, bus.SubjectEngine); err != nil || m != nil {
		t.Fatalf("Last before any report: %+v, %v; want nil, nil", m, err)
	}
	pub := bus.NewPublisher(readiness, "readiness")
	for i, st := range []*bus.EngineStatus{
		{Reason: v1alpha1.ReasonEngineMissing, Message: "no CRDs"},
		{Available: true, Reason: v1alpha1.ReasonEngineAvailable},
	} {
		if err := pub.Publish(ctxFor(t), bus.SubjectEngine, fmt.Sprintf("engine/%d", i), st); err != nil {
			t.Fatalf("publish engine report %d: %v", i, err)
		}
	}
	m, err := Last(ctxFor(t), planner, bus.StreamEvents, bus.SubjectEngine)
	if err != nil || m == nil {
		t.Fatalf("Last: %+v, %v", m, err)
	}
	var got bus.EngineStatus
	if err := m.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if m.Type != bus.TypeEngineStatus || m.ID != "engine/1" || m.Subject != bus.SubjectEngine || m.Sequence != 2 || !got.Available || got.Reason != v1alpha1.ReasonEngineAvailable {
		t.Errorf("Last: type %q, ID %q, subject %q, sequence %d, report %+v; want the second engine report, sequence 2", m.Type, m.ID, m.Subject, m.Sequence, got)
	}
	if m, err := Last(ctxFor(t), planner, bus.StreamEvents, bus.SubjectCredentials); err != nil || m != nil {
		t.Errorf("Last of a subject nothing was published on: %+v, %v; want nil, nil", m, err)
	}
}
