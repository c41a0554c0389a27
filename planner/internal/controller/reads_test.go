package controller

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// readCountingStore counts the reads of rollouts.
type readCountingStore struct {
	*memStore
	reads atomic.Int32
}

func (s *readCountingStore) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	s.reads.Add(1)
	return s.memStore.GetRollout(ctx, name)
}

// chainRollout returns a fake clock, a runtime and the initialized rollout of a chain of n
// releases.
func chainRollout(t *testing.T, n int) (*clocktesting.FakeClock, *v1alpha1.ClusterRuntime, *v1alpha1.RuntimeRollout) {
	t.Helper()
	p, err := plan.Resolve(chainBundle(n), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	rt := engineReported(&v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "u1"}})
	deadline := metav1.NewTime(clk.Now().Add(time.Hour))
	r := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: rollout.Name("", p.Digest())},
		Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "u1", ToDigest: p.Digest(), Deadline: &deadline}}
	rollout.Initialize(r, plan.Steps(nil, p, plan.StepOptions{}))
	return clk, rt, r
}

// engineReported records on rt that Argo CD is available, as the planner does once readiness
// reported: without a report no step starts.
func engineReported(rt *v1alpha1.ClusterRuntime) *v1alpha1.ClusterRuntime {
	rt.Status.Conditions = append(rt.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionEngineAvailable,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonEngineAvailable, Message: "test"})
	return rt
}

// A verdict reads the rollout once: the copy read under the runtime's lock is the one advanced
// (a conflict would read it again), so a step does not pay for a second read of every step.
func TestVerdictReadsTheRolloutOnce(t *testing.T) {
	clk, rt, r := chainRollout(t, 3)
	store := &readCountingStore{memStore: &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{r.Name: r}}}
	pub := &countingPublisher{}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, store, pub)
	defer c.queue.ShutDown()
	ctx := context.Background()
	if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
		t.Fatal(err)
	}
	if pub.n != 1 {
		t.Fatalf("%d commands after the first advance, want 1", pub.n)
	}
	store.reads.Store(0)
	stepID := v1alpha1.StepID(r.Name, 1)
	data, _ := json.Marshal(&bus.ReleaseVerdict{Header: bus.Header{Type: bus.TypeReleaseVerdict, ID: "v"}, Runtime: "cluster",
		Release: store.rollouts[r.Name].Status.Steps[0].Release, StepID: stepID, PlanDigest: store.rollouts[r.Name].Spec.ToDigest, Ready: true})
	if err := c.handleVerdict(ctx, &dispatch.Message{Type: bus.TypeReleaseVerdict, Data: data}); err != nil {
		t.Fatal(err)
	}
	if pub.n != 2 {
		t.Fatalf("%d commands after the verdict, want 2 (the next step started)", pub.n)
	}
	if got := store.reads.Load(); got != 1 {
		t.Errorf("the verdict read the rollout %d times, want 1", got)
	}
}

func TestSameGeneration(t *testing.T) {
	now := metav1.Now()
	tests := map[string]struct {
		old, new metav1.ObjectMeta
		want     bool
	}{
		"a status write keeps the generation": {old: metav1.ObjectMeta{Generation: 3}, new: metav1.ObjectMeta{Generation: 3, ResourceVersion: "9"}, want: true},
		"a spec change moves the generation":  {old: metav1.ObjectMeta{Generation: 3}, new: metav1.ObjectMeta{Generation: 4}, want: false},
		"deletion is reconciled at once":      {old: metav1.ObjectMeta{Generation: 3}, new: metav1.ObjectMeta{Generation: 3, DeletionTimestamp: &now}, want: false},
		"a later write of a deleting object":  {old: metav1.ObjectMeta{Generation: 3, DeletionTimestamp: &now}, new: metav1.ObjectMeta{Generation: 3, DeletionTimestamp: &now}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := sameGeneration(&v1alpha1.RuntimeRollout{ObjectMeta: tc.old}, &v1alpha1.RuntimeRollout{ObjectMeta: tc.new})
			if got != tc.want {
				t.Errorf("sameGeneration = %t, want %t", got, tc.want)
			}
		})
	}
}

// queueTimeout bounds the wait for the delaying queue's goroutine to move an item.
const queueTimeout = 5 * time.Second

// startedChain is a controller over an in-memory store whose chain rollout of n releases has
// its first step in flight.
func startedChain(t *testing.T, n int) (*clocktesting.FakeClock, *Controller, *memStore, *v1alpha1.RuntimeRollout) {
	t.Helper()
	clk, rt, r := chainRollout(t, n)
	store := &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{r.Name: r}}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, store, &countingPublisher{})
	t.Cleanup(c.queue.ShutDown)
	if _, _, err := c.advance(context.Background(), rt, r.Name, nil); err != nil {
		t.Fatal(err)
	}
	return clk, c, store, r
}

// readyVerdict delivers readiness's ready verdict for the rollout's first step.
func readyVerdict(t *testing.T, c *Controller, store *memStore, rolloutName string) {
	t.Helper()
	data, _ := json.Marshal(&bus.ReleaseVerdict{Header: bus.Header{Type: bus.TypeReleaseVerdict, ID: "v"}, Runtime: "cluster",
		Release: store.rollouts[rolloutName].Status.Steps[0].Release, StepID: v1alpha1.StepID(rolloutName, 1), PlanDigest: store.rollouts[rolloutName].Spec.ToDigest, Ready: true})
	if err := c.handleVerdict(context.Background(), &dispatch.Message{Type: bus.TypeReleaseVerdict, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// A verdict's reconcile of the runtime waits StatusCoalesce, so one step makes one reconcile.
func TestVerdictReconcileIsCoalesced(t *testing.T) {
	clk, c, store, r := startedChain(t, 3)
	ctx := context.Background()
	for range 2 { // a redelivery: still one reconcile
		readyVerdict(t, c, store, r.Name)
	}
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("%d runtimes queued at once, want none before StatusCoalesce", n)
	}
	clk.Step(StatusCoalesce)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, queueTimeout, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 1, nil
	})
	if err != nil {
		t.Fatalf("runtime not queued %s after the verdict: %v (queued %d)", StatusCoalesce, err, c.queue.Len())
	}
}

// writeCountingStore counts the rollout status writes.
type writeCountingStore struct {
	*memStore
	writes atomic.Int32
}

func (s *writeCountingStore) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	s.writes.Add(1)
	return s.memStore.UpdateRolloutStatus(ctx, r)
}

// The applier's "written" answer to a step still waiting for its verdict is a note: it does
// not write the whole rollout; the next write carries it, or the reconcile once the note
// waited NoteDelay. A result that decides something (Blocked here) is written at once.
func TestWrittenResultIsANote(t *testing.T) {
	clk, rt, r := chainRollout(t, 3)
	store := &writeCountingStore{memStore: &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{r.Name: r}}}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, store, &countingPublisher{})
	defer c.queue.ShutDown()
	ctx := context.Background()
	if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
		t.Fatal(err)
	}
	stepRef := bus.StepRef{Rollout: r.Name, Index: 1, ID: v1alpha1.StepID(r.Name, 1)}
	release := store.rollouts[r.Name].Status.Steps[0].Release
	deliver := func(outcome string) {
		t.Helper()
		data, _ := json.Marshal(&bus.ApplyResult{Header: bus.Header{Type: bus.TypeApplyResult, ID: outcome}, Runtime: "cluster",
			Release: release, Step: stepRef, Outcome: outcome})
		if err := c.handleResult(ctx, &dispatch.Message{Type: bus.TypeApplyResult, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	store.writes.Store(0)
	deliver(bus.OutcomeWritten)
	if n := store.writes.Load(); n != 0 {
		t.Fatalf("a Written result wrote the rollout %d times, want 0 (a note)", n)
	}
	if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
		t.Fatal(err)
	}
	if n := store.writes.Load(); n != 0 {
		t.Fatalf("a reconcile within NoteDelay wrote %d times, want 0 (the verdict may still carry the note)", n)
	}
	clk.Step(NoteDelay)
	if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
		t.Fatal(err)
	}
	if n := store.writes.Load(); n != 1 {
		t.Fatalf("the reconcile after NoteDelay wrote %d times, want 1 carrying the note", n)
	}
	if msg := store.rollouts[r.Name].Status.Steps[0].Message; !strings.Contains(msg, "written (Written)") {
		t.Fatalf("step message %q, want the note's", msg)
	}
	deliver(bus.OutcomeBlocked)
	if n := store.writes.Load(); n != 2 {
		t.Fatalf("a Blocked result wrote %d times in all, want 2 (written at once)", n)
	}
	if s := store.rollouts[r.Name].Status.Steps[0]; s.State != v1alpha1.StepBlocked {
		t.Fatalf("step %s after Blocked, want Blocked", s.State)
	}
}

// A stream of not-ready verdicts is written NoteDelay after the first, not postponed by each.
func TestNotesKeepTheirFirstTime(t *testing.T) {
	var n notes
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var applied []string
	mk := func(msg string, at time.Time) note {
		return note{at: at, observe: func(*v1alpha1.RuntimeRollout) { applied = append(applied, msg) }}
	}
	n.add("r", "verdict/r/1", mk("first", t0))
	n.add("r", "verdict/r/1", mk("second", t0.Add(NoteDelay/2)))
	if got := n.take("r", t0.Add(NoteDelay/2).Add(-NoteDelay)); len(got) != 0 {
		t.Fatalf("took %d notes before the first was NoteDelay old", len(got))
	}
	got := n.take("r", t0)
	if len(got) != 1 {
		t.Fatalf("took %d notes NoteDelay after the first, want 1", len(got))
	}
	applyNotes(&v1alpha1.RuntimeRollout{}, got)
	if len(applied) != 1 || applied[0] != "second" {
		t.Fatalf("applied %v, want the latest observation only", applied)
	}
}

// The verdict that ends a rollout queues the runtime at once: its Ready condition and active
// plan do not wait for StatusCoalesce.
func TestVerdictEndingTheRolloutReconcilesAtOnce(t *testing.T) {
	_, c, store, r := startedChain(t, 1)
	readyVerdict(t, c, store, r.Name)
	if phase := store.rollouts[r.Name].Status.Phase; phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("rollout %s after the last verdict, want Succeeded", phase)
	}
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("%d runtimes queued at once after the rollout ended, want 1", n)
	}
}

// A not-ready verdict kept as a note is applied later by whichever handler writes the rollout
// next, on another goroutine. The note must carry only the observation: a note that also set
// the keeping handler's own variables raced with that handler (the race-built planner of the
// chaos run reported it at every start; `make test` runs this under -race).
func TestAKeptVerdictNoteTouchesNothingOfItsHandler(t *testing.T) {
	_, c, store, r := startedChain(t, 3)
	ctx := context.Background()
	step := store.rollouts[r.Name].Status.Steps[0]
	data, _ := json.Marshal(&bus.ReleaseVerdict{Header: bus.Header{Type: bus.TypeReleaseVerdict, ID: "not-ready"}, Runtime: "cluster",
		Release: step.Release, StepID: v1alpha1.StepID(r.Name, 1), PlanDigest: r.Spec.ToDigest, Ready: false})
	done := make(chan error, 1)
	go func() { done <- c.handleVerdict(ctx, &dispatch.Message{Type: bus.TypeReleaseVerdict, Data: data}) }()
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, queueTimeout, true, func(context.Context) (bool, error) {
		return !c.notes.oldest(r.Name).IsZero(), nil
	})
	if err != nil {
		t.Fatalf("the not-ready verdict was not kept as a note: %v", err)
	}
	readyVerdict(t, c, store, r.Name) // writes the rollout, carrying the note
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := store.rollouts[r.Name].Status.Steps[0].State; got != v1alpha1.StepSucceeded {
		t.Fatalf("step 1 is %s after its ready verdict carried the not-ready note, want Succeeded", got)
	}
	if !c.notes.oldest(r.Name).IsZero() {
		t.Fatal("the note is still kept after a write carried it")
	}
}

// The planner's own ConfigMaps are not news to it: a rollout's steps ConfigMap, or a plan it
// holds, created or changed queues no reconcile (each was a reconcile and a runtime status
// write under the runtime's lock, five per 30-step rollout). A bundle, a plan it does not hold
// (one restored after it was lost) and any deletion still queue every runtime.
func TestOwnConfigMapsQueueNoReconcile(t *testing.T) {
	c := New(Config{Name: "planner", Namespace: "aicr-system"}, &memStore{}, &countingPublisher{})
	t.Cleanup(c.queue.ShutDown)
	c.names = func() []string { return []string{"cluster"} }
	held, err := plan.Resolve(chainBundle(2), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.plans.Add(held); err != nil {
		t.Fatal(err)
	}
	other, err := plan.Resolve(chainBundle(3), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	planCM := func(p *plan.Plan) *corev1.ConfigMap {
		cm, err := p.ConfigMap("aicr-system")
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	_, _, r := chainRollout(t, 2)
	r.UID = "r1"
	stepsCM, err := rolloutsteps.ConfigMap(r, "aicr-system", rolloutsteps.DefinitionsName(r), r.Status.Steps)
	if err != nil {
		t.Fatal(err)
	}
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aicr-bundle", Namespace: "aicr-system"}}
	for _, tc := range []struct {
		name   string
		event  func(any)
		cm     *corev1.ConfigMap
		queued int
	}{
		{"steps ConfigMap created", c.configMapChanged, stepsCM, 0},
		{"held plan created", c.configMapChanged, planCM(held), 0},
		{"plan not held created", c.configMapChanged, planCM(other), 1},
		{"bundle changed", c.configMapChanged, bundle, 1},
		{"steps ConfigMap deleted", c.enqueueConfigMap, stepsCM, 1},
		{"held plan deleted", c.enqueueConfigMap, planCM(held), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event(tc.cm)
			if n := c.queue.Len(); n != tc.queued {
				t.Fatalf("%d runtimes queued, want %d", n, tc.queued)
			}
			for c.queue.Len() > 0 {
				key, _ := c.queue.Get()
				c.queue.Done(key)
			}
		})
	}
}
