package controller

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// metricsNamespace is the planner's metric namespace: with the binary's aicr_ prefix, its
// metrics are aicr_planner_*.
const metricsNamespace = "planner"

// Metrics are the planner's own metrics. The counters and histograms move when a rollout status
// write changes a step or ends the rollout (recordChanges), so each transition is counted once
// by the replica that wrote it; the runtime gauges are read from the informer's cache at scrape
// time (none before the caches synced, so only the leader reports them).
type Metrics struct {
	stepsStarted    *prometheus.CounterVec
	stepsSucceeded  *prometheus.CounterVec
	stepsFailed     *prometheus.CounterVec
	stepDuration    *prometheus.HistogramVec
	stepAdvance     prometheus.Histogram
	rollouts        *prometheus.CounterVec
	rolloutDuration *prometheus.HistogramVec
	// releaseSteps and releaseStepDuration are the steps' ends by runtime and release (a
	// plan's releases are a bounded set: tens), so an alert or a panel can name a component.
	releaseSteps        *prometheus.CounterVec
	releaseStepDuration *prometheus.HistogramVec

	// runtimes lists the runtimes in the informer's cache; nil until a controller runs.
	runtimes atomic.Pointer[func() []*v1alpha1.ClusterRuntime]
}

// NewMetrics registers the planner's metrics with reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stepsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "steps_started_total",
			Help: "Rollout steps started (their command published for the first time), by action.",
		}, []string{"action"}),
		stepsSucceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "steps_succeeded_total",
			Help: "Rollout steps judged ready at their revision (or removed), by action.",
		}, []string{"action"}),
		stepsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "steps_failed_total",
			Help: "Rollout steps failed (action timeout, refused, the rollout ended under them), by action and reason.",
		}, []string{"action", "reason"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "step_duration_seconds",
			Help:    "Time from a step's start to its end, by action and result (succeeded, failed).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 15), // 0.5 s to about 2 h 15 min
		}, []string{"action", "result"}),
		stepAdvance: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "step_advance_seconds",
			Help:    "Time from the planner receiving a ready verdict to publishing the command of a step it unblocked.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms to about 16 s
		}),
		rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "rollouts_total",
			Help: "Rollouts ended, by outcome (RolloutSucceeded, RolloutFailed, RolloutExpired, RolloutRevoked, RolloutSuperseded).",
		}, []string{"outcome"}),
		rolloutDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "rollout_duration_seconds",
			Help:    "Time from a rollout's first step to its end, by outcome.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16), // 1 s to about 9 h
		}, []string{"outcome"}),
		releaseSteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "release_steps_total",
			Help: "Rollout steps ended, by runtime, release and result (succeeded, failed).",
		}, []string{"runtime", "release", "result"}),
		releaseStepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "release_step_duration_seconds",
			Help:    "Time from a step's start to its end, by runtime, release and result (succeeded, failed).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8), // 1 s to about 4 h 30 min
		}, []string{"runtime", "release", "result"}),
	}
	// Every known label value starts at zero, so a rate or an alert works before the first
	// event (and a dashboard's series exist from the start).
	for _, a := range []v1alpha1.StepAction{v1alpha1.ActionInstall, v1alpha1.ActionUpgrade, v1alpha1.ActionApply, v1alpha1.ActionRemove} {
		action := string(a)
		m.stepsStarted.WithLabelValues(action)
		m.stepsSucceeded.WithLabelValues(action)
		for _, reason := range []string{v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked} {
			m.stepsFailed.WithLabelValues(action, reason)
		}
		m.stepDuration.WithLabelValues(action, "succeeded")
		m.stepDuration.WithLabelValues(action, "failed")
	}
	for _, o := range []string{v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked, v1alpha1.OutcomeSuperseded} {
		m.rollouts.WithLabelValues(o)
		m.rolloutDuration.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.stepsStarted, m.stepsSucceeded, m.stepsFailed, m.stepDuration, m.stepAdvance,
			m.rollouts, m.rolloutDuration, m.releaseSteps, m.releaseStepDuration, &runtimeCollector{m: m})
	}
	return m
}

// observeChanges counts what one rollout status write changed.
func (m *Metrics) observeChanges(before *v1alpha1.RuntimeRolloutStatus, after *v1alpha1.RuntimeRollout) {
	for _, ch := range rollout.StepChanges(before, &after.Status) {
		s := &ch.Step
		action := string(s.Action)
		rt, rel := after.Spec.Runtime, s.Release
		switch s.State {
		case v1alpha1.StepInProgress:
			if ch.From != v1alpha1.StepBlocked {
				m.stepsStarted.WithLabelValues(action).Inc()
			}
			// The release's series start at zero with its first step, so a rate or an alert
			// on its failures has a series before the first one.
			for _, result := range []string{"succeeded", "failed"} {
				m.releaseSteps.WithLabelValues(rt, rel, result)
			}
		case v1alpha1.StepSucceeded:
			m.stepsSucceeded.WithLabelValues(action).Inc()
			m.releaseSteps.WithLabelValues(rt, rel, "succeeded").Inc()
			if d, ok := rollout.Duration(s); ok {
				m.stepDuration.WithLabelValues(action, "succeeded").Observe(d.Seconds())
				m.releaseStepDuration.WithLabelValues(rt, rel, "succeeded").Observe(d.Seconds())
			}
		case v1alpha1.StepFailed:
			m.stepsFailed.WithLabelValues(action, s.Reason).Inc()
			m.releaseSteps.WithLabelValues(rt, rel, "failed").Inc()
			if d, ok := rollout.Duration(s); ok {
				m.stepDuration.WithLabelValues(action, "failed").Observe(d.Seconds())
				m.releaseStepDuration.WithLabelValues(rt, rel, "failed").Observe(d.Seconds())
			}
		}
	}
	if rollout.EndedNow(before, &after.Status) {
		m.rollouts.WithLabelValues(after.Status.Outcome).Inc()
		if st, fin := after.Status.StartedAt, after.Status.FinishedAt; st != nil && fin != nil && !fin.Before(st) {
			m.rolloutDuration.WithLabelValues(after.Status.Outcome).Observe(fin.Sub(st.Time).Seconds())
		}
	}
}

// verdictReceivedKey carries the time a ready verdict's handling began, for step_advance_seconds.
type verdictReceivedKey struct{}

func withVerdictReceived(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, verdictReceivedKey{}, at)
}

// observeAdvance records the step-advance latency of a command published while handling a
// verdict.
func (m *Metrics) observeAdvance(ctx context.Context) {
	if at, ok := ctx.Value(verdictReceivedKey{}).(time.Time); ok {
		m.stepAdvance.Observe(time.Since(at).Seconds())
	}
}

// runtimeCollector reports each cached runtime's conditions:
//
//	aicr_planner_runtime_condition{runtime,type,status,reason} 1
//	aicr_planner_runtime_condition_transition_timestamp_seconds{runtime,type,status,reason}
//
// The second is the condition's lastTransitionTime: `time() - it` is how long the runtime has
// been Stalled/AwaitingApproval, for instance.
type runtimeCollector struct{ m *Metrics }

var (
	condLabels   = []string{"runtime", "type", "status", "reason"}
	condDesc     = prometheus.NewDesc(metricsNamespace+"_runtime_condition", "1 for each condition a ClusterRuntime has, with its status and reason.", condLabels, nil)
	condSinceDes = prometheus.NewDesc(metricsNamespace+"_runtime_condition_transition_timestamp_seconds", "Unix time a ClusterRuntime's condition last changed status.", condLabels, nil)
)

func (rc *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- condDesc
	ch <- condSinceDes
}

func (rc *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	list := rc.m.runtimes.Load()
	if list == nil {
		return
	}
	for _, rt := range (*list)() {
		for _, c := range rt.Status.Conditions {
			labels := []string{rt.Name, c.Type, string(c.Status), c.Reason}
			ch <- prometheus.MustNewConstMetric(condDesc, prometheus.GaugeValue, 1, labels...)
			if !c.LastTransitionTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(condSinceDes, prometheus.GaugeValue, float64(c.LastTransitionTime.Unix()), labels...)
			}
		}
	}
}

// cachedRuntimes lists the runtimes in the informer's cache, nil until it synced; it never asks
// the API server.
func (s *cachedStore) cachedRuntimes() []*v1alpha1.ClusterRuntime {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtimes == nil || !s.synced() {
		return nil
	}
	var out []*v1alpha1.ClusterRuntime
	for _, key := range s.runtimes.ListKeys() {
		if obj, ok := s.cached(s.runtimes, kindRuntime, key); ok {
			if rt, ok := obj.(*v1alpha1.ClusterRuntime); ok {
				out = append(out, rt)
			}
		}
	}
	return out
}
