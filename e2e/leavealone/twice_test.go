//go:build e2e

package leavealone

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// dupSuffix ends the message ID of a drift report the test delivers a second time, so JetStream
// keeps the copy (its duplicate window drops a message ID it holds).
const dupSuffix = "/delivered-twice"

// addedField is the field the test's hand edit adds to the values.
const addedField = ".spec.source.helm.valuesObject.note"

// "Edit an owned Application" with every drift report readiness publishes delivered twice: the
// test copies each one to the events stream again, as a redelivery would hand it to the
// planner. The outcome is the one of a single delivery: the edit is forced back by one command,
// written (the applier answers one; the spec changes twice, the edit and the repair; one repair
// step), one FieldOwnershipOverridden, no rollout. The test waits until the planner has acknowledged the
// last copy (its consumer's ack floor) before it counts.
func TestEveryDriftReportDeliveredTwiceChangesNothing(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	ctx := t.Context()
	const rel = "nfd"
	want := stacktest.Values(t, stacktest.Application(t, s, rel).Spec.Source)
	rollouts, err := s.Operator.Rollouts().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := startDuplicating(t, s)
	results := watchResults(t, s, rel)
	commands := commandsPublished(t, s)
	overridden := eventCounts(t, s, v1alpha1.EventFieldOwnershipOverridden, "Application "+rel+" was edited")
	seen := markEvents(t, s)
	history := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)

	// The edit adds a key the plan does not state: drift in the values, but no field the
	// operator applied was taken over, so the Event names the field and no manager (a drift
	// report's Managers are those that took over the operator's fields).
	edited := stacktest.PatchApp(t, s, rel, `{"spec":{"source":{"helm":{"valuesObject":{"note":"by hand"}}}}}`)
	waitEvent(t, s, seen, repairTimeout, v1alpha1.EventFieldOwnershipOverridden, "Application "+rel+" was edited", bus.DriftValues, addedField)
	stacktest.WaitApp(t, s, rel, repairTimeout, "forced back to the planned values", func(a *argoapp.Application) bool { return equalJSON(stacktest.Values(t, a.Spec.Source), want) })
	// The last report of the edit: readiness's report with no kinds once the drift is gone,
	// copied, and the planner's acknowledgement of the copy.
	last := d.waitCopied(t, rel, func(r *bus.DriftReport) bool { return len(r.Kinds) == 0 })
	waitAcked(t, s, last)
	// The planner acknowledges a drift report once it has queued a check of the release; the
	// checks run one at a time, in order. An edit of another release queues one after them: once
	// it is forced back, every check the copies queued has decided.
	const sentinel = "jobset"
	sentinelWant := stacktest.Values(t, stacktest.Application(t, s, sentinel).Spec.Source)
	stacktest.PatchApp(t, s, sentinel, `{"spec":{"source":{"helm":{"valuesObject":{"note":"after the copies"}}}}}`)
	stacktest.WaitApp(t, s, sentinel, repairTimeout, "forced back after the checks the copies queued", func(a *argoapp.Application) bool {
		return equalJSON(stacktest.Values(t, a.Spec.Source), sentinelWant)
	})
	if n := commandsPublished(t, s) - commands; n != 2 {
		t.Errorf("the planner published %d commands, want 2: one repair of %s and one of %s", n, rel, sentinel)
	}
	rolledOut(t, s) // Ready again, at the same plan (below)
	reports, copies := d.counts()
	t.Logf("readiness published %d drift reports during the test, each delivered twice (%d copies); the planner acknowledged the stream up to sequence %d", reports, copies, last)

	editRV := revision(t, edited.ResourceVersion)
	var specChanges int
	// The steps that wrote the Application after the edit: each write of the operator's names
	// its step; Argo CD's status writes between the edit and the repair keep the edited
	// version's.
	editStep := edited.Annotations[v1alpha1.AnnotationStep]
	steps := map[string]bool{}
	prev := ""
	for _, r := range history.Of(t, rel) {
		spec, err := json.Marshal(r.Object.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		if r.RV >= editRV && prev != "" && string(spec) != prev {
			specChanges++
		}
		if step := r.Object.GetAnnotations()[v1alpha1.AnnotationStep]; r.RV > editRV && step != editStep {
			steps[step] = true
		}
		prev = string(spec)
	}
	if specChanges != 2 {
		t.Errorf("the spec of %s changed %d times from the hand edit on, want 2 (the edit and its one repair)", rel, specChanges)
	}
	if len(steps) != 1 {
		t.Errorf("%s was written after the edit by steps %v, want one repair", rel, steps)
	}
	for step := range steps {
		if !strings.HasPrefix(step, "repair/") {
			t.Errorf("%s was written after the edit by step %q, want a repair", rel, step)
		}
	}
	if got := results.all(); len(got) != 1 || !writeDone(got[0].Outcome) {
		t.Errorf("the applier answered %d commands for %s (%v), want one repair written", len(got), rel, describeResults(got))
	}
	var n int32
	for name, c := range eventCounts(t, s, v1alpha1.EventFieldOwnershipOverridden, "Application "+rel+" was edited") {
		n += c - overridden[name]
	}
	if n != 1 {
		t.Errorf("FieldOwnershipOverridden recorded %d times for %s, want once", n, rel)
	}
	after, err := s.Operator.Rollouts().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(rollouts.Items) {
		t.Errorf("%d rollouts after the edit, %d before: a repair is no rollout", len(after.Items), len(rollouts.Items))
	}
	if got, err := s.Runtime(ctx); err != nil || got.Status.Rollout != rt.Status.Rollout || got.Status.ActivePlan != rt.Status.ActivePlan {
		t.Errorf("the runtime moved: %v", err)
	}
}

// duplicator copies every drift report published to the events stream, once.
type duplicator struct {
	mu      sync.Mutex
	reports int
	copies  map[uint64]*bus.DriftReport // by the copy's stream sequence
}

// startDuplicating copies each drift report published from now on to its subject again, under
// a new message ID, until the test ends.
func startDuplicating(t *testing.T, s *stack.Stack) *duplicator {
	t.Helper()
	js := stacktest.Observer(t, s, "e2e-leavealone-duplicator")
	cons, err := js.OrderedConsumer(t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SubjectDriftPattern}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		t.Fatal(err)
	}
	d := &duplicator{copies: map[uint64]*bus.DriftReport{}}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		if strings.HasSuffix(id, dupSuffix) {
			return
		}
		var r bus.DriftReport
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			t.Errorf("decode a drift report: %v", err)
			return
		}
		h := nats.Header{}
		for k, v := range m.Headers() {
			h[k] = v
		}
		h.Set(jetstream.MsgIDHeader, id+dupSuffix)
		ack, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: m.Subject(), Header: h, Data: m.Data()})
		if err != nil {
			t.Errorf("deliver drift report %s again: %v", id, err)
			return
		}
		d.mu.Lock()
		d.reports++
		d.copies[ack.Sequence] = &r
		d.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return d
}

// waitCopied waits for a copy of a drift report of release that match accepts, and returns
// the copy's stream sequence.
func (d *duplicator) waitCopied(t *testing.T, release string, match func(*bus.DriftReport) bool) uint64 {
	t.Helper()
	var seq uint64
	err := testenv.WaitFor(t.Context(), repairTimeout, "a drift report of "+release+" delivered twice", func(context.Context) (bool, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for sq, r := range d.copies {
			if r.Release == release && match(r) && sq > seq {
				seq = sq
			}
		}
		return seq != 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func (d *duplicator) counts() (reports, copies int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reports, len(d.copies)
}

// waitAcked waits until the planner's consumer has acknowledged every message of the events
// stream up to seq: the planner handled it.
func waitAcked(t *testing.T, s *stack.Stack, seq uint64) {
	t.Helper()
	js := stacktest.Observer(t, s, "e2e-leavealone-acks")
	err := testenv.WaitFor(t.Context(), repairTimeout, fmt.Sprintf("the planner's acknowledgement of stream sequence %d", seq), func(ctx context.Context) (bool, error) {
		c, err := js.Consumer(ctx, bus.StreamEvents, bus.ConsumerPlanner)
		if err != nil {
			return false, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return false, err
		}
		if info.AckFloor.Stream < seq {
			return false, fmt.Errorf("ack floor %d", info.AckFloor.Stream)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// commandsPublished is the sequence of the last command published to the commands stream.
func commandsPublished(t *testing.T, s *stack.Stack) uint64 {
	t.Helper()
	js := stacktest.Observer(t, s, "e2e-leavealone-commands")
	str, err := js.Stream(t.Context(), bus.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// results records the applier's answers about one release from now on: one per command it
// carried out or refused.
type results struct {
	mu  sync.Mutex
	got []*bus.ApplyResult
}

func watchResults(t *testing.T, s *stack.Stack, release string) *results {
	t.Helper()
	js := stacktest.Observer(t, s, "e2e-leavealone-results")
	cons, err := js.OrderedConsumer(t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.AppliedSubject(v1alpha1.RuntimeName, release)}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		t.Fatal(err)
	}
	r := &results{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var res bus.ApplyResult
		if err := json.Unmarshal(m.Data(), &res); err != nil {
			t.Errorf("decode an apply result: %v", err)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, &res)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return r
}

func (r *results) all() []*bus.ApplyResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*bus.ApplyResult(nil), r.got...)
}

// writeDone reports whether an applier's outcome is a write of the Application.
func writeDone(outcome string) bool {
	return outcome == bus.OutcomeWritten || outcome == bus.OutcomeRefreshed || outcome == bus.OutcomeSyncStarted
}

func describeResults(rs []*bus.ApplyResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %s %s", r.CommandID, r.Outcome, r.Reason, r.Message))
	}
	return strings.Join(out, "; ")
}

// eventCounts returns how many times each Event about the runtime with reason and a message
// containing part was recorded, by name (client-go's recorder counts a repeat on one Event).
func eventCounts(t *testing.T, s *stack.Stack, reason, part string) map[string]int32 {
	t.Helper()
	list, err := s.Kube.CoreV1().Events(eventNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for i := range list.Items {
		if e := &list.Items[i]; e.InvolvedObject.Kind == "ClusterRuntime" && e.Reason == reason && strings.Contains(e.Message, part) {
			out[e.Name] = max(e.Count, 1)
		}
	}
	return out
}

// revision parses a resourceVersion (an etcd revision on the local stack).
func revision(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an etcd revision: %v", s, err)
	}
	return n
}
