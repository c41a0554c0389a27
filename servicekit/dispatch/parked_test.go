package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// parkAfter is the tests' Dispatcher.ParkAfter: with Backoff, a poison message is parked
// within a second.
const parkAfter = 3

var errPoison = errors.New("apply application argocd/poison: admission webhook denied the request")

// poisonOr fails every handling of the release "poison", and handles the others.
func poisonOr(m *Message) error {
	var c bus.ApplyCommand
	if err := m.Decode(&c); err != nil {
		return err
	}
	if c.Release == "poison" {
		return errPoison
	}
	return nil
}

func publishApply(t *testing.T, pub *bus.Publisher, release string) {
	t.Helper()
	if err := pub.Publish(ctxFor(t), bus.ApplySubject("cluster", release), "apply/"+release, applyCommand(release)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

func parkedState(t *testing.T, js jetstream.JetStream) bus.ParkedState {
	t.Helper()
	st, err := ReadParked(ctxFor(t), js, 10)
	if err != nil {
		t.Fatalf("ReadParked: %v", err)
	}
	return st
}

// A message whose handler keeps failing is parked after ParkAfter failures, with its subject,
// error and count, and leaves the work queue; the messages behind it are handled meanwhile, by
// the one worker there is.
func TestAMessageThatKeepsFailingIsParked(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	mets := NewMetrics(prometheus.NewRegistry(), "test")
	pub := bus.NewPublisher(js, "planner")
	runDispatcher(t, &Dispatcher{Consumer: c, Workers: 1, Metrics: mets, ParkAfter: parkAfter,
		Park: pub.PublishMsg, Routes: Routes{bus.TypeApplyCommand: rec.handler("applier", poisonOr)}})

	publishApply(t, pub, "poison")
	for i := range 3 {
		publishApply(t, pub, fmt.Sprintf("good-%d", i))
	}
	settled(t, js, c)

	perRelease := map[string]int{}
	for _, d := range rec.deliveries() {
		perRelease[d.id]++
	}
	want := map[string]int{"apply/poison": parkAfter, "apply/good-0": 1, "apply/good-1": 1, "apply/good-2": 1}
	if fmt.Sprint(perRelease) != fmt.Sprint(want) {
		t.Errorf("handlings per message = %v, want %v", perRelease, want)
	}
	st := parkedState(t, js)
	if st.Total != 1 || len(st.Oldest) != 1 {
		t.Fatalf("parked stream holds %d (%d read), want the poison message", st.Total, len(st.Oldest))
	}
	p := st.Oldest[0]
	if p.Subject != bus.ApplySubject("cluster", "poison") || p.Stream != bus.StreamCommands || p.Consumer != bus.ConsumerApplier ||
		p.Failures != parkAfter || p.Error != errPoison.Error() || p.MsgID != "apply/poison" {
		t.Errorf("parked = %+v", p)
	}
	if v := testutil.ToFloat64(mets.handled.WithLabelValues(bus.TypeApplyCommand, "parked")); v != 1 {
		t.Errorf("parked count = %v, want 1", v)
	}
}

// NotYet answers are redeliveries JetStream counts, but no failures: a message that waited
// is parked only after ParkAfter failed handlings of its own.
func TestNotYetDoesNotCountTowardsParking(t *testing.T) {
	const waits = 5
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	pub := bus.NewPublisher(js, "planner")
	runDispatcher(t, &Dispatcher{Consumer: c, ParkAfter: parkAfter, Park: pub.PublishMsg, Routes: Routes{
		bus.TypeApplyCommand: rec.handler("applier", func(m *Message) error {
			if m.Delivered <= waits {
				return NotYet(10*time.Millisecond, "the Application is being deleted")
			}
			return errPoison
		}),
	}})
	publishApply(t, pub, "poison")
	settled(t, js, c)
	if n := len(rec.deliveries()); n != waits+parkAfter {
		t.Errorf("%d handlings before it was parked, want %d waits and %d failures", n, waits, parkAfter)
	}
	if st := parkedState(t, js); st.Total != 1 || st.Oldest[0].Failures != parkAfter {
		t.Errorf("parked = %+v, want one message after %d failures", st, parkAfter)
	}
}

// An applier upgraded before the planner finds no parked stream: the failing command stays
// on its consumer, redelivered with backoff as before, and is parked once the stream exists.
func TestWithoutTheParkedStreamTheMessageStays(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	createOldStreams(t, js)
	c, err := ensureConsumer(ctxFor(t), js, bus.ConsumerApplier)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	pub := bus.NewPublisher(js, "planner")
	parks := atomic.Int32{}
	park := func(ctx context.Context, m *nats.Msg) error {
		parks.Add(1)
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond) // no stream: no answer
		defer cancel()
		return pub.PublishMsg(ctx, m)
	}
	runDispatcher(t, &Dispatcher{Consumer: c, ParkAfter: 2, Park: park, Routes: Routes{bus.TypeApplyCommand: rec.handler("applier", poisonOr)}})
	publishApply(t, pub, "poison")
	eventually(t, "two failed attempts to park", func() (bool, string) {
		return parks.Load() >= 2, strconv.Itoa(int(parks.Load()))
	})
	s, err := js.Stream(ctxFor(t), bus.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctxFor(t)); err != nil || info.State.Msgs != 1 {
		t.Fatalf("commands stream after failed parks: %+v, %v; want the command still there", info, err)
	}
	if err := EnsureStreams(ctxFor(t), js, 1); err != nil { // the planner upgraded
		t.Fatal(err)
	}
	settled(t, js, c)
	if st := parkedState(t, js); st.Total != 1 || st.Oldest[0].Subject != bus.ApplySubject("cluster", "poison") {
		t.Errorf("parked = %+v, want the poison command", st)
	}
}

// A parked message read back and retried goes to its subject again, is handled like any
// other, and leaves the parked stream; retrying it twice sends it once.
func TestARetriedMessageIsHandledAgain(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	c, err := EnsureConsumer(ctxFor(t), js, bus.ConsumerApplier, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	pub := bus.NewPublisher(js, "planner")
	fixed := atomic.Bool{}
	runDispatcher(t, &Dispatcher{Consumer: c, ParkAfter: parkAfter, Park: pub.PublishMsg, Routes: Routes{
		bus.TypeApplyCommand: rec.handler("applier", func(m *Message) error {
			if fixed.Load() {
				return nil
			}
			return poisonOr(m)
		}),
	}})
	publishApply(t, pub, "poison")
	settled(t, js, c)
	st := parkedState(t, js)
	if st.Total != 1 {
		t.Fatalf("parked stream holds %d, want 1", st.Total)
	}
	fixed.Store(true) // a person fixed the cause
	for range 2 {
		if err := RetryParked(ctxFor(t), js, pub.PublishMsg, st.Oldest[0]); err != nil {
			t.Fatalf("RetryParked: %v", err)
		}
	}
	settled(t, js, c)
	got := rec.deliveries()
	if len(got) != parkAfter+1 || got[len(got)-1].id != "apply/poison" {
		t.Errorf("deliveries = %+v, want %d failures and one handling of the retry", got, parkAfter)
	}
	if st := parkedState(t, js); st.Total != 0 {
		t.Errorf("parked stream still holds %d after the retry", st.Total)
	}
	if err := RetryParked(ctxFor(t), js, pub.PublishMsg, &bus.Parked{Seq: 9, Error: "no headers"}); err == nil {
		t.Error("a parked message that does not say where it came from was retried")
	}
}

// createOldStreams declares the streams as the operator did before the parked stream: the
// commands and events streams only.
func createOldStreams(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	for _, cfg := range bus.StreamConfigs(1) {
		if cfg.Name == bus.StreamParked {
			continue
		}
		if _, err := js.CreateStream(ctxFor(t), cfg); err != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
	}
}
