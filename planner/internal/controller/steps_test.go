package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// configMapStore is a versionedStore that keeps ConfigMaps, refuses to replace one (as the
// API server does), and can fail the next rollout status write.
type configMapStore struct {
	*versionedStore
	cms        map[string]*corev1.ConfigMap
	creates    int
	failStatus bool
}

func newConfigMapStore() *configMapStore {
	return &configMapStore{versionedStore: newVersionedStore(), cms: map[string]*corev1.ConfigMap{}}
}

func (s *configMapStore) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm, ok := s.cms[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return cm.DeepCopy(), nil
}

func (s *configMapStore) CreateConfigMap(_ context.Context, cm *corev1.ConfigMap) error {
	key := cm.Namespace + "/" + cm.Name
	if _, ok := s.cms[key]; ok {
		return apierrors.NewAlreadyExists(corev1.Resource("configmaps"), cm.Name)
	}
	s.creates++
	s.cms[key] = cm.DeepCopy()
	return nil
}

func (s *configMapStore) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	if s.failStatus {
		s.failStatus = false
		return nil, errors.New("connection reset")
	}
	return s.versionedStore.UpdateRolloutStatus(ctx, r)
}

func chainSteps(n int) []v1alpha1.Step {
	var out []v1alpha1.Step
	for i := 1; i <= n; i++ {
		s := v1alpha1.Step{Index: int32(i), Release: fmt.Sprintf("rel-%03d", i), Action: v1alpha1.ActionInstall, State: v1alpha1.StepPending}
		if i > 1 {
			s.DependsOn = []string{fmt.Sprintf("rel-%03d", i-1)}
		}
		out = append(out, s)
	}
	return out
}

// succeed marks step i (from 1) of r Succeeded with a verdict and starts the next, as one step
// of a chain does.
func succeed(r *v1alpha1.RuntimeRollout, i int) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
	s := &r.Status.Steps[i-1]
	s.State, s.FinishedAt = v1alpha1.StepSucceeded, &at
	s.Verdict = &v1alpha1.Verdict{Ready: true, ResourceVersion: fmt.Sprint(1000 + i), ObservedAt: &at,
		Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}}}
	if i < len(r.Status.Steps) {
		next := &r.Status.Steps[i]
		next.State, next.StartedAt = v1alpha1.StepInProgress, &at
	}
}

func storedSize(t *testing.T, r *v1alpha1.RuntimeRollout) int {
	t.Helper()
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}

// TestStepStoreChain runs a 100-step chain through the stepStore and checks that the stored
// rollout stays small (at most one batch of finished steps, whatever the step), that every
// step reads back whole, and that a crash between a batch and the status write loses nothing.
func TestStepStoreChain(t *testing.T) {
	ctx := context.Background()
	const n = 100
	live := newConfigMapStore()
	s := newStepStore(live, "aicr-system")
	created, err := s.CreateRollout(ctx, &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-to-from"}})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = v1alpha1.PhaseProgressing
	created.Status.Steps = chainSteps(n)
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	created.Status.Steps[0].State, created.Status.Steps[0].StartedAt = v1alpha1.StepInProgress, &start
	cur, err := s.UpdateRolloutStatus(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	stored := live.rollouts["r-to-from"]
	if stored.Status.StepRecords == nil || len(stored.Status.Steps) != 1 || stored.Status.StepCounts.Total != n {
		t.Fatalf("first write stored %d steps, records %+v, counts %+v; want the one in flight, records and %d in all",
			len(stored.Status.Steps), stored.Status.StepRecords, stored.Status.StepCounts, n)
	}
	sizes := []int{storedSize(t, stored)}
	for i := 1; i <= n; i++ {
		succeed(cur, i)
		if i == 2*rolloutsteps.BatchSize {
			// A crash after the second batch was created, before the status that counts it was
			// written. The restarted planner sees one more step finish before it writes: the
			// batch it finds holds one step fewer than it would write, and that step must stay.
			live.failStatus = true
			if _, err := s.UpdateRolloutStatus(ctx, cur.DeepCopy()); err == nil {
				t.Fatal("the failing status write succeeded")
			}
			s = newStepStore(live, "aicr-system") // a restarted planner: nothing decoded yet
			if cur, err = s.GetRollout(ctx, "r-to-from"); err != nil {
				t.Fatal(err)
			}
			succeed(cur, i)
			i++
			succeed(cur, i)
		}
		if cur, err = s.UpdateRolloutStatus(ctx, cur); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		stored = live.rollouts["r-to-from"]
		if len(stored.Status.Steps) > rolloutsteps.BatchSize {
			t.Fatalf("step %d: the stored status lists %d steps; at most %d", i, len(stored.Status.Steps), rolloutsteps.BatchSize)
		}
		sizes = append(sizes, storedSize(t, stored))
	}
	if recs := stored.Status.StepRecords; recs.FinishedBatches != n/rolloutsteps.BatchSize {
		t.Fatalf("%d batches; want %d", recs.FinishedBatches, n/rolloutsteps.BatchSize)
	}
	if c := stored.Status.StepCounts; c.Succeeded != n || c.Total != n {
		t.Fatalf("counts %+v", c)
	}
	// Every step reads back with its verdict, from a planner that decoded nothing yet.
	got, err := newStepStore(live, "aicr-system").GetRollout(ctx, "r-to-from")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Steps) != n {
		t.Fatalf("read back %d steps; want %d", len(got.Status.Steps), n)
	}
	for i, st := range got.Status.Steps {
		if st.Index != int32(i+1) || st.State != v1alpha1.StepSucceeded || st.Verdict == nil || st.Verdict.ResourceVersion != fmt.Sprint(1001+i) {
			t.Fatalf("step %d read back as %+v", i+1, st)
		}
	}
	// The object written at step 90 is no larger than at step 10 plus one batch's worth.
	maxSize := 0
	for _, sz := range sizes {
		maxSize = max(maxSize, sz)
	}
	if limit := sizes[1] + rolloutsteps.BatchSize*400; maxSize > limit {
		t.Fatalf("largest stored rollout %d bytes; the second write was %d, so the bound is %d", maxSize, sizes[1], limit)
	}
	if live.creates != 1+n/rolloutsteps.BatchSize {
		t.Fatalf("%d ConfigMaps created; want the definitions and %d batches", live.creates, n/rolloutsteps.BatchSize)
	}
}

// TestStepStoreDefinitionsFound: the first write of steps crashed after the definitions were
// created; the repeated write takes the stored definitions as the rollout's steps.
func TestStepStoreDefinitionsFound(t *testing.T) {
	ctx := context.Background()
	live := newConfigMapStore()
	s := newStepStore(live, "aicr-system")
	r, err := s.CreateRollout(ctx, &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-to-from"}})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := rolloutsteps.ConfigMap(r, "aicr-system", rolloutsteps.DefinitionsName(r), chainSteps(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := live.CreateConfigMap(ctx, cm); err != nil {
		t.Fatal(err)
	}
	r.Status.Phase = v1alpha1.PhaseProgressing
	r.Status.Steps = chainSteps(4)
	out, err := s.UpdateRolloutStatus(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Status.Steps) != 3 || out.Status.StepCounts.Total != 3 {
		t.Fatalf("the rollout has %d steps (counted %d); want the 3 stored ones", len(out.Status.Steps), out.Status.StepCounts.Total)
	}
	// A ConfigMap of an earlier rollout of the same name and UID prefix is refused by name.
	other := out.DeepCopy()
	other.UID = "not-" + other.UID
	if _, err := newStepStore(live, "aicr-system").expand(ctx, other); err == nil {
		t.Fatal("a ConfigMap owned by another rollout was read as this one's")
	}
}
