//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// writeMeter watches the kinds the planner writes during a rollout and records, for every new
// version of an object, the size of the object as the API server stores and sends it (its JSON):
// what each write costs the API server and etcd grows with it.
type writeMeter struct {
	mu     sync.Mutex
	writes map[string][]int // resource -> size of each version, in watch order
	stop   []func()
}

// newWriteMeter starts watching each resource from now on (the list's resourceVersion: no
// existing object counts).
func newWriteMeter(ctx context.Context, resources ...schema.GroupVersionResource) (*writeMeter, error) {
	m := &writeMeter{writes: map[string][]int{}}
	for _, gvr := range resources {
		res := h.dyn.Resource(gvr)
		list, err := res.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			m.close()
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			m.close()
			return nil, fmt.Errorf("watch %s: %w", gvr.Resource, err)
		}
		m.stop = append(m.stop, w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				raw, err := json.Marshal(u.Object)
				if err != nil {
					continue
				}
				m.mu.Lock()
				m.writes[gvr.Resource] = append(m.writes[gvr.Resource], len(raw))
				m.mu.Unlock()
			}
		}()
	}
	return m, nil
}

func (m *writeMeter) close() {
	for _, s := range m.stop {
		s()
	}
}

// sizes returns a copy of the sizes of resource's writes so far.
func (m *writeMeter) sizes(resource string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.writes[resource]...)
}

// total is the number of writes and their bytes over every watched resource.
func (m *writeMeter) total() (n, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.writes {
		for _, b := range s {
			n++
			bytes += b
		}
	}
	return n, bytes
}

// meanKiB is the mean of sizes in KiB (0 for none).
func meanKiB(sizes []int) float64 {
	if len(sizes) == 0 {
		return 0
	}
	var sum int
	for _, s := range sizes {
		sum += s
	}
	return float64(sum) / float64(len(sizes)) / 1024
}

// sizeWindow is how many writes at each end of the chain startEnd averages: the planner moves
// finished steps out of the rollout in batches of 32, so a window of 32 holds one whole cycle.
const sizeWindow = 32

// maxKiB is the largest of sizes, in KiB.
func maxKiB(sizes []int) float64 {
	m := 0
	for _, s := range sizes {
		m = max(m, s)
	}
	return float64(m) / 1024
}

// startEnd is the mean size of the first and of the last n of sizes, in KiB.
func startEnd(sizes []int, n int) (first, last float64) {
	n = min(n, len(sizes))
	return meanKiB(sizes[:n]), meanKiB(sizes[len(sizes)-n:])
}

// plannerWrites are the kinds the planner writes while a rollout runs: its rollouts, the
// runtime's status, and ConfigMaps (the plan, and the ConfigMaps that hold a rollout's steps).
var plannerWrites = []schema.GroupVersionResource{
	v1alpha1.RuntimeRolloutResource,
	v1alpha1.ClusterRuntimeResource,
	corev1.SchemeGroupVersion.WithResource("configmaps"),
}
