package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// memStore is an in-memory Store for benchmarks: it measures the planner's own handling,
// without an API server round trip.
type memStore struct {
	mu       sync.Mutex
	runtime  *v1alpha1.ClusterRuntime
	rollouts map[string]*v1alpha1.RuntimeRollout
}

var grRollout = schema.GroupResource{Group: v1alpha1.Group, Resource: resRollouts}

func (s *memStore) GetRuntime(context.Context, string) (*v1alpha1.ClusterRuntime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runtime.DeepCopy(), nil
}
func (s *memStore) UpdateRuntime(_ context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	return rt, nil
}
func (s *memStore) UpdateRuntimeStatus(_ context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	return rt, nil
}
func (s *memStore) ListRollouts(context.Context, string) ([]v1alpha1.RuntimeRollout, error) {
	return nil, nil
}
func (s *memStore) GetRollout(_ context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rollouts[name]
	if !ok {
		return nil, apierrors.NewNotFound(grRollout, name)
	}
	return r.DeepCopy(), nil
}
func (s *memStore) CreateRollout(_ context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	return r, nil
}
func (s *memStore) UpdateRollout(_ context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	return r, nil
}
func (s *memStore) UpdateRolloutStatus(_ context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollouts[r.Name] = r.DeepCopy()
	return r, nil
}
func (s *memStore) DeleteRollout(context.Context, string, string) error { return nil }
func (s *memStore) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}
func (s *memStore) CreateConfigMap(context.Context, *corev1.ConfigMap) error { return nil }
func (s *memStore) ListPlans(context.Context, string) ([]corev1.ConfigMap, error) {
	return nil, nil
}
func (s *memStore) DeleteConfigMap(context.Context, string, string, string) error { return nil }

// countingPublisher counts commands and remembers the last one.
type countingPublisher struct {
	mu   sync.Mutex
	n    int
	last string
}

func (p *countingPublisher) Publish(_ context.Context, _ string, id string, _ bus.Envelope) error {
	p.mu.Lock()
	p.n++
	p.last = id
	p.mu.Unlock()
	return nil
}

func chainBundle(n int) *plan.Bundle {
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "bench", Version: "1"}}
	for i := range n {
		c := plan.Component{Name: fmt.Sprintf("r%05d", i), Namespace: fmt.Sprintf("ns%05d", i),
			Chart:  plan.ChartRef{Path: fmt.Sprintf("charts/r%05d", i), Digest: fmt.Sprintf("sha256:%064x", i+1)},
			Values: json.RawMessage(`{"image":{"tag":"v1"},"replicas":2}`)}
		if i > 0 { // a wide DAG: each release depends on up to two earlier ones
			c.DependsOn = append(c.DependsOn, fmt.Sprintf("r%05d", (i-1)/2))
			if i > 2 && (i-1)/2 != i-2 {
				c.DependsOn = append(c.DependsOn, fmt.Sprintf("r%05d", i-2))
			}
		}
		b.Components = append(b.Components, c)
	}
	return b
}

// BenchmarkPlanCompute reports the time to resolve a plan and derive its steps.
func BenchmarkPlanCompute(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle := chainBundle(n)
			if err := bundle.Validate(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				p, err := plan.Resolve(bundle, plan.Inputs{})
				if err != nil {
					b.Fatal(err)
				}
				if steps := plan.Steps(nil, p, plan.StepOptions{}); len(steps) != n {
					b.Fatalf("%d steps", len(steps))
				}
			}
		})
	}
}

// BenchmarkVerdictToNextCommand reports the planner's in-process handling time from a ready
// verdict to the next command published (in-memory store: no API server round trip).
func BenchmarkVerdictToNextCommand(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			p, err := plan.Resolve(chainBundle(n), plan.Inputs{})
			if err != nil {
				b.Fatal(err)
			}
			steps := plan.Steps(nil, p, plan.StepOptions{})
			clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
			rt := engineReported(&v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "u1"}})
			deadline := metav1.NewTime(clk.Now().Add(time.Hour))
			r := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: rollout.Name("", p.Digest())},
				Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "u1", ToDigest: p.Digest(), Deadline: &deadline}}
			rollout.Initialize(r, steps)
			store := &memStore{runtime: rt, rollouts: map[string]*v1alpha1.RuntimeRollout{r.Name: r}}
			pub := &countingPublisher{}
			c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, store, pub)
			defer c.queue.ShutDown()
			ctx := context.Background()
			if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if i >= n-1 {
					b.StopTimer()
					store.rollouts[r.Name] = r.DeepCopy()
					pub.n = 0
					c.published = map[string]bool{}
					if _, _, err := c.advance(ctx, rt, r.Name, nil); err != nil {
						b.Fatal(err)
					}
					i = 0
					b.StartTimer()
				}
				before := pub.n
				stepID := pub.last[:len(pub.last)-2] // "<rollout>/<index>" from "<rollout>/<index>/1"
				_, idx, _ := v1alpha1.ParseStepID(stepID)
				rel := steps[idx-1].Release
				data, _ := json.Marshal(&bus.ReleaseVerdict{Header: bus.Header{Type: bus.TypeReleaseVerdict, ID: "v"}, Runtime: "cluster", Release: rel, StepID: stepID, PlanDigest: store.rollouts[r.Name].Spec.ToDigest, Ready: true})
				if err := c.handleVerdict(ctx, &dispatch.Message{Type: bus.TypeReleaseVerdict, Data: data}); err != nil {
					b.Fatal(err)
				}
				if pub.n != before+1 {
					b.Fatalf("verdict for %s published %d commands, want 1", stepID, pub.n-before)
				}
			}
		})
	}
}
