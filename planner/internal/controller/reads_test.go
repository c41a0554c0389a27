package controller

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
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

// A verdict reads the rollout once: the copy read under the runtime's lock is the one advanced
// (a conflict would read it again), so a step does not pay for a second read of every step.
func TestVerdictReadsTheRolloutOnce(t *testing.T) {
	p, err := plan.Resolve(chainBundle(3), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "u1"}}
	deadline := metav1.NewTime(clk.Now().Add(time.Hour))
	r := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: rollout.Name("", p.Digest())},
		Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "u1", ToDigest: p.Digest(), Deadline: &deadline}}
	rollout.Initialize(r, plan.Steps(nil, p, plan.StepOptions{}))
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
	stepID := rollout.StepID(r.Name, 1)
	data, _ := json.Marshal(&bus.ReleaseVerdict{Header: bus.Header{Type: bus.TypeReleaseVerdict, ID: "v"}, Runtime: "cluster",
		Release: store.rollouts[r.Name].Status.Steps[0].Release, StepID: stepID, Ready: true})
	if err := c.handleVerdict(ctx, &bus.Message{Type: bus.TypeReleaseVerdict, Data: data}); err != nil {
		t.Fatal(err)
	}
	if pub.n != 2 {
		t.Fatalf("%d commands after the verdict, want 2 (the next step started)", pub.n)
	}
	if got := store.reads.Load(); got != 1 {
		t.Errorf("the verdict read the rollout %d times, want 1", got)
	}
}
