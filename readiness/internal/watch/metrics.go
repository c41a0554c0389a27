package watch

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aicr-run/aicr-operator/readiness/internal/fences"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// metricsNamespace is readiness's metric namespace: aicr_readiness_* with the binary's prefix.
const metricsNamespace = "readiness"

// Metrics are what the watcher counts.
type Metrics struct {
	verdicts *prometheus.CounterVec
	fences   *prometheus.CounterVec
	drift    *prometheus.CounterVec
	lag      prometheus.Histogram
	// queued reports the work queue's length; nil until a watcher runs.
	queued atomic.Pointer[func() int]
}

// Label values of verdicts_total's result.
const (
	resultReady    = "ready"
	resultNotReady = "not_ready"
	resultFailed   = "failed"
)

// driftCleared is drift_reports_total's kind for a report that the drift is gone.
const driftCleared = "Cleared"

// NewMetrics registers readiness's watch metrics with reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "verdicts_total",
			Help: "Verdicts published, by result (ready, not_ready, failed: a fence failed and will not pass without a change).",
		}, []string{"result"}),
		fences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "verdict_fences_total",
			Help: "Fences of the verdicts published, by fence and state (Passed, Open, Failed).",
		}, []string{"fence", "state"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "drift_reports_total",
			Help: "Drift reports published, by drift kind (Source, Values, Destination, Other, AutoSyncDisabled, FinalizerAdded, Deleted; Cleared when the drift is gone).",
		}, []string{"kind"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "watch_lag_seconds",
			Help:    "Time from Argo CD's reconcile of an Application (status.reconciledAt, one-second precision) to readiness judging it.",
			Buckets: []float64{0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300},
		}),
	}
	// Every known label value starts at zero (rates and alerts work before the first event).
	for _, r := range []string{resultReady, resultNotReady, resultFailed} {
		m.verdicts.WithLabelValues(r)
	}
	for _, f := range []string{v1alpha1.FenceComparedToSpec, v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep,
		v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition, v1alpha1.FenceGateSynced} {
		for _, st := range []v1alpha1.FenceState{v1alpha1.FencePassed, v1alpha1.FenceOpen, v1alpha1.FenceFailed} {
			m.fences.WithLabelValues(f, string(st))
		}
	}
	for _, k := range []string{bus.DriftSource, bus.DriftValues, bus.DriftDestination, bus.DriftOther, bus.DriftAutoSyncDisabled,
		bus.DriftFinalizerAdded, bus.DriftDeleted, driftCleared} {
		m.drift.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.verdicts, m.fences, m.drift, m.lag, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "queue_depth",
			Help: "Applications waiting in the watcher's work queue.",
		}, func() float64 {
			if f := m.queued.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		}))
	}
	return m
}

func (m *Metrics) observeVerdict(v fences.Verdict) {
	if m == nil {
		return
	}
	result := resultNotReady
	switch {
	case v.Ready:
		result = resultReady
	case v.Failed:
		result = resultFailed
	}
	m.verdicts.WithLabelValues(result).Inc()
	for _, f := range v.Fences {
		m.fences.WithLabelValues(f.Name, string(f.State)).Inc()
	}
}

func (m *Metrics) observeDrift(kinds []string) {
	if m == nil {
		return
	}
	if len(kinds) == 0 {
		m.drift.WithLabelValues(driftCleared).Inc()
	}
	for _, k := range kinds {
		m.drift.WithLabelValues(k).Inc()
	}
}

// observeReconcile records the watch lag of an Application whose reconciledAt moved since the
// watcher last saw it (the first sight of it, from the initial list, is not a lag), and returns
// the reconciledAt to remember.
func (m *Metrics) observeReconcile(app *argoapp.Application, last time.Time, now time.Time) time.Time {
	ra := app.Status.ReconciledAt
	if ra == nil {
		return last
	}
	if m != nil && !last.IsZero() && !ra.Time.Equal(last) {
		m.lag.Observe(max(now.Sub(ra.Time), 0).Seconds())
	}
	return ra.Time
}
