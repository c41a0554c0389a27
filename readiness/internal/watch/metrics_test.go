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
	want := `
# HELP aicr_readiness_verdicts_total Verdicts published, by result (ready, not_ready, failed: a fence failed and will not pass without a change).
# TYPE aicr_readiness_verdicts_total counter
aicr_readiness_verdicts_total{result="failed"} 1
aicr_readiness_verdicts_total{result="not_ready"} 1
aicr_readiness_verdicts_total{result="ready"} 1
# HELP aicr_readiness_verdict_fences_total Fences of the verdicts published, by fence and state (Passed, Open, Failed).
# TYPE aicr_readiness_verdict_fences_total counter
aicr_readiness_verdict_fences_total{fence="Healthy",state="Passed"} 2
aicr_readiness_verdict_fences_total{fence="SyncedAtRevision",state="Open"} 1
# HELP aicr_readiness_drift_reports_total Drift reports published, by drift kind (Source, Values, Destination, Other, AutoSyncDisabled, FinalizerAdded, Deleted; Cleared when the drift is gone).
# TYPE aicr_readiness_drift_reports_total counter
aicr_readiness_drift_reports_total{kind="AutoSyncDisabled"} 1
aicr_readiness_drift_reports_total{kind="Cleared"} 1
aicr_readiness_drift_reports_total{kind="Values"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "aicr_readiness_verdicts_total", "aicr_readiness_verdict_fences_total", "aicr_readiness_drift_reports_total"); err != nil {
		t.Error(err)
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
