//go:build integration

package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// syncTimeout bounds the watcher's first sync of every benchmark Application.
const syncTimeout = 5 * time.Minute

type counter struct{ n atomic.Int64 }

func (c *counter) Publish(context.Context, string, string, bus.Envelope) error {
	c.n.Add(1)
	return nil
}

// BenchmarkWatch10000Applications creates 10 000 owned Applications with the status Argo CD
// writes (resources, history, operation result) on a real apiserver, runs the watcher until it
// has judged every one, and reports the heap in use after GC that the watch added. The
// Applications are written as JSON with the parts of Argo CD's status argoapp does not decode
// (status.resources, history, syncResult.resources), and watched through argoapp.
func BenchmarkWatch10000Applications(b *testing.B) {
	const n = 10000
	// Its own environment, started here rather than in a TestMain: make test runs no benchmarks
	// and so starts no apiserver for this package.
	env := testenv.StartT(b, testenv.Options{})
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	lean, err := argoapp.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	p, _ := testPlan(b)
	app := written(b, p, "r-1/1")
	app.UID, app.ResourceVersion = "", ""
	base := asMap(b, app)
	status := base["status"].(map[string]any)
	source := asMap(b, app.Spec.Source)
	var history, resources, results []any
	for i := 0; i < 3; i++ { // Argo CD keeps up to 10; the fixtures show 3
		history = append(history, map[string]any{"id": i, "revision": app.Spec.Source.TargetRevision, "source": source,
			"deployedAt": "2027-01-15T08:00:00Z", "deployStartedAt": "2027-01-15T08:00:00Z"})
	}
	for i := 0; i < 40; i++ { // the status of a release with 40 resources
		r := map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "gpu-operator", "name": fmt.Sprintf("component-%02d", i)}
		resources = append(resources, merged(r, map[string]any{"status": "Synced", "health": map[string]any{"status": "Healthy"}}))
		results = append(results, merged(r, map[string]any{"message": "deployment.apps/component serverside-applied", "status": "Synced", "hookPhase": "Running", "syncPhase": "Sync"}))
	}
	status["history"], status["resources"] = history, resources
	status["operationState"].(map[string]any)["syncResult"].(map[string]any)["resources"] = results
	apps := lean.Applications("argocd")
	existing, err := apps.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	if len(existing.Items) == 0 {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					base := merged(base, nil)
					base["metadata"] = merged(base["metadata"].(map[string]any), map[string]any{"name": fmt.Sprintf("release-%05d", i)})
					body, err := json.Marshal(base)
					if err == nil {
						err = lean.RESTClient().Post().Namespace("argocd").Resource(argoapp.ResourceApplications).Body(body).Do(ctx).Error()
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		before := heapInUse()
		pub := &counter{}
		w := &Watcher{Apps: apps, Publisher: pub}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		deadline := time.Now().Add(syncTimeout)
		for pub.n.Load() < n {
			if time.Now().After(deadline) {
				b.Fatalf("judged %d of %d Applications within %s", pub.n.Load(), n, syncTimeout)
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(after-before)/n, "heap-B/app")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		runtime.KeepAlive(w)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// asMap is v's JSON as a map.
func asMap(tb testing.TB, v any) map[string]any {
	tb.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// merged is a shallow copy of a with b's members set.
func merged(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
