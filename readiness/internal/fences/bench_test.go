package fences

import (
	"testing"

	synccommon "github.com/argoproj/argo-cd/gitops-engine/pkg/sync/common"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// BenchmarkEvaluate reports evaluations per second of a ready Application and of one in the
// middle of a sync (the two shapes the watcher sees most).
func BenchmarkEvaluate(b *testing.B) {
	for name, in := range map[string]*argov1alpha1.Application{
		"ready":   readyApp(),
		"syncing": readyApp(phase(synccommon.OperationRunning, "waiting for completion of hook")),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Evaluate(in)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}
