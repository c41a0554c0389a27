//go:build integration

package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argoclient "github.com/argoproj/argo-cd/v3/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/testenv"
)

// syncTimeout bounds the watcher's first sync of every benchmark Application.
const syncTimeout = 5 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{SkipApplicationSetCRD: true}))
}

type counter struct{ n atomic.Int64 }

func (c *counter) Publish(context.Context, string, string, bus.Envelope) error {
	c.n.Add(1)
	return nil
}

// BenchmarkWatch10000Applications creates 10 000 owned Applications with the status Argo CD
// writes (resources, history, operation result) on a real apiserver, runs the watcher until it
// has judged every one, and reports the heap in use after GC that the watch added. The
// Applications are written with Argo CD's own types and clientset (the benchmark plays Argo CD),
// and watched through argoapp.
func BenchmarkWatch10000Applications(b *testing.B) {
	const n = 10000
	env := testenv.Current(b)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	argo := argoclient.NewForConfigOrDie(&cfg)
	lean, err := argoapp.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	p, _ := testPlan(b)
	base := upstream(b, written(b, p, "r-1/1"))
	base.UID, base.ResourceVersion = "", ""
	deployed := metav1.NewTime(time.Unix(1_800_000_000, 0))
	base.Status.History = nil
	for i := int64(0); i < 3; i++ { // Argo CD keeps up to 10; the fixtures show 3
		base.Status.History = append(base.Status.History, argov1alpha1.RevisionHistory{ID: i, Revision: base.Spec.Source.TargetRevision, Source: *base.Spec.Source.DeepCopy(), DeployedAt: deployed, DeployStartedAt: &deployed})
	}
	for i := 0; i < 40; i++ { // the status of a release with 40 resources
		base.Status.Resources = append(base.Status.Resources, argov1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "gpu-operator", Name: fmt.Sprintf("component-%02d", i), Status: argov1alpha1.SyncStatusCodeSynced})
		base.Status.OperationState.SyncResult.Resources = append(base.Status.OperationState.SyncResult.Resources, &argov1alpha1.ResourceResult{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "gpu-operator", Name: fmt.Sprintf("component-%02d", i), Message: "deployment.apps/component serverside-applied"})
	}
	apps := argo.ArgoprojV1alpha1().Applications("argocd")
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
					a := base.DeepCopy()
					a.Name = fmt.Sprintf("release-%05d", i)
					if _, err := apps.Create(ctx, a, metav1.CreateOptions{}); err != nil {
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
		w := &Watcher{Apps: lean.Applications("argocd"), Publisher: pub}
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

// upstream converts an Application to Argo CD's type through its JSON.
func upstream(tb testing.TB, app *argoapp.Application) *argov1alpha1.Application {
	tb.Helper()
	raw, err := json.Marshal(app)
	if err != nil {
		tb.Fatal(err)
	}
	var out argov1alpha1.Application
	if err := json.Unmarshal(raw, &out); err != nil {
		tb.Fatal(err)
	}
	return &out
}
