package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// statusRecordingStore keeps every runtime status written.
type statusRecordingStore struct {
	*memStore
	mu      sync.Mutex
	written []v1alpha1.ClusterRuntimeStatus
}

func (s *statusRecordingStore) UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	s.mu.Lock()
	s.written = append(s.written, *rt.Status.DeepCopy())
	s.mu.Unlock()
	return s.memStore.UpdateRuntimeStatus(ctx, rt)
}

func (s *statusRecordingStore) writes() []v1alpha1.ClusterRuntimeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]v1alpha1.ClusterRuntimeStatus(nil), s.written...)
}

// A resolution faster than ResolvingAfter is never reported as in progress (no status write
// stands between a bundle change and its rollout); a slower one says Resolving, and its end
// waits for that write, so it never lands after what the reconcile writes next.
func TestResolvingIsSaidOnlyOfASlowResolution(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "u1", Generation: 3}}
	store := &statusRecordingStore{memStore: &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{}}}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, store, &countingPublisher{})
	defer c.queue.ShutDown()
	ctx := context.Background()

	done := c.sayResolving(ctx, "cluster")
	clk.Step(ResolvingAfter - time.Millisecond)
	done()
	clk.Step(time.Hour) // the timer of a finished resolution never fires a write
	if w := store.writes(); len(w) != 0 {
		t.Fatalf("a resolution of %s wrote the runtime's status %d times, want none", ResolvingAfter-time.Millisecond, len(w))
	}

	done = c.sayResolving(ctx, "cluster")
	clk.Step(ResolvingAfter)
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(store.writes()) == 1, nil
	})
	if err != nil {
		t.Fatalf("a resolution still running after %s: %d status writes, want 1 saying Resolving", ResolvingAfter, len(store.writes()))
	}
	done()
	cond := meta.FindStatusCondition(store.writes()[0].Conditions, v1alpha1.ConditionResolved)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonResolving || cond.ObservedGeneration != 3 {
		t.Fatalf("Resolved condition %+v, want False/Resolving at generation 3", cond)
	}
}
