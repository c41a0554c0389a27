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
	// components lists the last verdict of each Application the watcher judged; nil while no
	// watcher runs (a replica that does not lead reports none).
	components atomic.Pointer[func() []Component]
}

// Component is the last verdict readiness reached on one release's Application: what the
// per-component gauges report.
type Component struct {
	Runtime, Release string
	Ready            bool
	// Fences are the verdict's judged fences (v1alpha1.FenceJudged): the one that holds the
	// verdict back is named once, the fences after it that were not judged are left out.
	Fences []v1alpha1.Fence
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
		reg.MustRegister(m.verdicts, m.fences, m.drift, m.lag, &componentCollector{m: m}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
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

// componentCollector reports each judged release's last verdict, read from the watcher's state at
// scrape time (so a deleted Application's series go with it):
//
//	aicr_readiness_component_ready{runtime,release}              1 ready, 0 not
//	aicr_readiness_component_fence{runtime,release,fence,state}  1 per judged fence
//
// The second names the fence that holds a release back (AicrComponentNotReady reads it).
type componentCollector struct{ m *Metrics }

var (
	componentReadyDesc = prometheus.NewDesc(metricsNamespace+"_component_ready",
		"1 when the last verdict on a release's Application is ready, 0 when it is not.", []string{"runtime", "release"}, nil)
	componentFenceDesc = prometheus.NewDesc(metricsNamespace+"_component_fence",
		"1 for each judged fence of the last verdict on a release's Application, with its state (Passed, Open, Failed).",
		[]string{"runtime", "release", "fence", "state"}, nil)
)

func (cc *componentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- componentReadyDesc
	ch <- componentFenceDesc
}

func (cc *componentCollector) Collect(ch chan<- prometheus.Metric) {
	list := cc.m.components.Load()
	if list == nil {
		return
	}
	for _, c := range (*list)() {
		ready := 0.0
		if c.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(componentReadyDesc, prometheus.GaugeValue, ready, c.Runtime, c.Release)
		for _, f := range c.Fences {
			ch <- prometheus.MustNewConstMetric(componentFenceDesc, prometheus.GaugeValue, 1, c.Runtime, c.Release, f.Name, string(f.State))
		}
	}
}

// newComponent keeps what the gauges report of verdict v on app.
func newComponent(app *argoapp.Application, v fences.Verdict) *Component {
	c := &Component{Runtime: app.Labels[v1alpha1.LabelRuntime], Release: app.Name, Ready: v.Ready}
	for _, f := range v.Fences {
		if v1alpha1.FenceJudged(f) {
			c.Fences = append(c.Fences, f)
		}
	}
	return c
}
