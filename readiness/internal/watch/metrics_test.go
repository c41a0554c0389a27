package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/readiness/internal/fences"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(prometheus.WrapRegistererWithPrefix("aicr_", reg))
	passed := v1alpha1.Fence{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}
	open := v1alpha1.Fence{Name: v1alpha1.FenceSyncedAtRevision, State: v1alpha1.FenceOpen}
	m.observeVerdict(fences.Verdict{Ready: true, Fences: []v1alpha1.Fence{passed}})
	m.observeVerdict(fences.Verdict{Fences: []v1alpha1.Fence{passed, open}})
	m.observeVerdict(fences.Verdict{Failed: true})
	m.observeDrift([]string{bus.DriftValues, bus.DriftAutoSyncDisabled})
	m.observeDrift(nil)
	counters := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.verdicts.WithLabelValues("ready"), 1},
		{m.verdicts.WithLabelValues("not_ready"), 1},
		{m.verdicts.WithLabelValues("failed"), 1},
		{m.fences.WithLabelValues(v1alpha1.FenceHealthy, "Passed"), 2},
		{m.fences.WithLabelValues(v1alpha1.FenceSyncedAtRevision, "Open"), 1},
		{m.fences.WithLabelValues(v1alpha1.FenceGateSynced, "Failed"), 0}, // known, at zero
		{m.drift.WithLabelValues(bus.DriftValues), 1},
		{m.drift.WithLabelValues(bus.DriftAutoSyncDisabled), 1},
		{m.drift.WithLabelValues("Cleared"), 1},
		{m.drift.WithLabelValues(bus.DriftDeleted), 0},
	}
	for i, c := range counters {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("counter %d = %v, want %v", i, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "aicr_readiness_verdict_fences_total"); err != nil || n != 18 {
		t.Errorf("%d fence series (%v), want six fences by three states from the start", n, err)
	}

	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	app := func(at time.Time) *argoapp.Application {
		a := &argoapp.Application{}
		ra := metav1.NewTime(at)
		a.Status.ReconciledAt = &ra
		return a
	}
	last := m.observeReconcile(app(t0), time.Time{}, t0.Add(time.Hour)) // first sight: the initial list, no lag
	last = m.observeReconcile(app(t0), last, t0.Add(time.Hour))         // the same reconcile again: none
	last = m.observeReconcile(app(t0.Add(time.Minute)), last, t0.Add(time.Minute+1500*time.Millisecond))
	if !last.Equal(t0.Add(time.Minute)) {
		t.Errorf("remembered reconcile %v", last)
	}
	m.observeReconcile(&argoapp.Application{}, last, t0) // no reconciledAt: nothing
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aicr_readiness_watch_lag_seconds Time from Argo CD's reconcile of an Application (status.reconciledAt, one-second precision) to readiness judging it.
# TYPE aicr_readiness_watch_lag_seconds histogram
aicr_readiness_watch_lag_seconds_bucket{le="0.5"} 0
aicr_readiness_watch_lag_seconds_bucket{le="1"} 0
aicr_readiness_watch_lag_seconds_bucket{le="2"} 1
aicr_readiness_watch_lag_seconds_bucket{le="3"} 1
aicr_readiness_watch_lag_seconds_bucket{le="5"} 1
aicr_readiness_watch_lag_seconds_bucket{le="10"} 1
aicr_readiness_watch_lag_seconds_bucket{le="20"} 1
aicr_readiness_watch_lag_seconds_bucket{le="30"} 1
aicr_readiness_watch_lag_seconds_bucket{le="60"} 1
aicr_readiness_watch_lag_seconds_bucket{le="120"} 1
aicr_readiness_watch_lag_seconds_bucket{le="300"} 1
aicr_readiness_watch_lag_seconds_bucket{le="+Inf"} 1
aicr_readiness_watch_lag_seconds_sum 1.5
aicr_readiness_watch_lag_seconds_count 1
`), "aicr_readiness_watch_lag_seconds"); err != nil {
		t.Error(err)
	}
	var none *Metrics // a watcher without metrics
	none.observeVerdict(fences.Verdict{Ready: true})
	none.observeDrift(nil)
}
