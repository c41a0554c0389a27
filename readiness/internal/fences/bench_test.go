package fences

import (
	"github.com/aicr-run/aicr-operator/shared/argoapp"

	"testing"
)

// BenchmarkEvaluate reports evaluations per second of a ready Application and of one in the
// middle of a sync (the two shapes the watcher sees most).
func BenchmarkEvaluate(b *testing.B) {
	for name, in := range map[string]*argoapp.Application{
		"ready":   readyApp(),
		"syncing": readyApp(phase(argoapp.OperationRunning, "waiting for completion of hook")),
	} {
		pl := planned(in)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Evaluate(in, pl)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}
