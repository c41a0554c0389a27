package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestMetricsObserveChanges proves the step and rollout metrics follow the status writes: a start
// counts once (not a resume from Blocked), an end counts with its duration, and the rollout's end
// counts its outcome.
func TestMetricsObserveChanges(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(prometheus.WrapRegistererWithPrefix("aicr_", reg))
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { x := metav1.NewTime(t0.Add(d)); return &x }
	step := func(i int32, action v1alpha1.StepAction, state v1alpha1.StepState, fin *metav1.Time) v1alpha1.Step {
		return v1alpha1.Step{Index: i, Release: "r", Action: action, State: state, StartedAt: at(0), FinishedAt: fin}
	}
	r := &v1alpha1.RuntimeRollout{Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster"}}
	writes := []v1alpha1.RuntimeRolloutStatus{
		{Phase: v1alpha1.PhasePending, Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepPending, nil), step(2, v1alpha1.ActionUpgrade, v1alpha1.StepPending, nil)}},
		{Phase: v1alpha1.PhaseProgressing, Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepInProgress, nil), step(2, v1alpha1.ActionUpgrade, v1alpha1.StepPending, nil)}},
		{Phase: v1alpha1.PhaseProgressing, Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepSucceeded, at(3*time.Second)), step(2, v1alpha1.ActionUpgrade, v1alpha1.StepInProgress, nil)}},
		{Phase: v1alpha1.PhaseStalled, Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepSucceeded, at(3*time.Second)), step(2, v1alpha1.ActionUpgrade, v1alpha1.StepBlocked, nil)}},
		{Phase: v1alpha1.PhaseProgressing, Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepSucceeded, at(3*time.Second)), step(2, v1alpha1.ActionUpgrade, v1alpha1.StepInProgress, nil)}},
		{Phase: v1alpha1.PhaseFailed, Outcome: v1alpha1.OutcomeFailed, StartedAt: at(0), FinishedAt: at(15 * time.Minute),
			Steps: []v1alpha1.Step{step(1, v1alpha1.ActionInstall, v1alpha1.StepSucceeded, at(3*time.Second)), func() v1alpha1.Step {
				s := step(2, v1alpha1.ActionUpgrade, v1alpha1.StepFailed, at(15*time.Minute))
				s.Reason = v1alpha1.ReasonRolloutFailed
				return s
			}()}},
	}
	var before v1alpha1.RuntimeRolloutStatus
	for _, w := range writes {
		r.Status = w
		m.observeChanges(&before, r)
		before = w
	}
	counters := []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.stepsStarted.WithLabelValues("Install"), 1},
		{m.stepsStarted.WithLabelValues("Upgrade"), 1}, // once: resuming from Blocked is no start
		{m.stepsStarted.WithLabelValues("Remove"), 0},  // known, at zero before any Remove
		{m.stepsSucceeded.WithLabelValues("Install"), 1},
		{m.stepsSucceeded.WithLabelValues("Upgrade"), 0},
		{m.stepsFailed.WithLabelValues("Upgrade", v1alpha1.ReasonRolloutFailed), 1},
		{m.rollouts.WithLabelValues(v1alpha1.OutcomeFailed), 1},
		{m.rollouts.WithLabelValues(v1alpha1.OutcomeSucceeded), 0},
		// both steps are release r's: one succeeded, one failed
		{m.releaseSteps.WithLabelValues("cluster", "r", "succeeded"), 1},
		{m.releaseSteps.WithLabelValues("cluster", "r", "failed"), 1},
	}
	for i, c := range counters {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("counter %d = %v, want %v", i, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "aicr_planner_rollouts_total"); err != nil || n != 5 {
		t.Errorf("%d rollout outcome series (%v), want all five from the start", n, err)
	}
	if got := sampleSum(t, reg, "aicr_planner_rollout_duration_seconds"); got != 900 {
		t.Errorf("rollout duration sum %v, want 900", got)
	}
	if got := sampleSum(t, reg, "aicr_planner_step_duration_seconds"); got != 3+900 {
		t.Errorf("step duration sum %v, want 903", got)
	}
	if got := sampleSum(t, reg, "aicr_planner_release_step_duration_seconds"); got != 3+900 {
		t.Errorf("release step duration sum %v, want 903", got)
	}

	// Only a verdict's handling observes the step-advance latency.
	m.observeAdvance(context.Background())
	m.observeAdvance(withVerdictReceived(context.Background(), time.Now().Add(-50*time.Millisecond)))
	if got := sampleCount(t, reg, "aicr_planner_step_advance_seconds"); got != 1 {
		t.Errorf("%d step advance observations, want 1", got)
	}
}

// TestRuntimeConditionMetrics proves the runtime gauges come from the cache only once it is there.
func TestRuntimeConditionMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(prometheus.WrapRegistererWithPrefix("aicr_", reg))
	if n, err := testutil.GatherAndCount(reg, "aicr_planner_runtime_condition"); err != nil || n != 0 {
		t.Fatalf("%d condition series before a controller (%v), want 0", n, err)
	}
	since := metav1.NewTime(time.Unix(1777000000, 0))
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: v1alpha1.ClusterRuntimeStatus{Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRollingOut, LastTransitionTime: since},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAwaitingApproval, LastTransitionTime: since},
	}}}
	list := func() []*v1alpha1.ClusterRuntime { return []*v1alpha1.ClusterRuntime{rt} }
	m.runtimes.Store(&list)
	want := `
# HELP aicr_planner_runtime_condition 1 for each condition a ClusterRuntime has, with its status and reason.
# TYPE aicr_planner_runtime_condition gauge
aicr_planner_runtime_condition{reason="AwaitingApproval",runtime="cluster",status="True",type="Stalled"} 1
aicr_planner_runtime_condition{reason="RollingOut",runtime="cluster",status="False",type="Ready"} 1
# HELP aicr_planner_runtime_condition_transition_timestamp_seconds Unix time a ClusterRuntime's condition last changed status.
# TYPE aicr_planner_runtime_condition_transition_timestamp_seconds gauge
aicr_planner_runtime_condition_transition_timestamp_seconds{reason="AwaitingApproval",runtime="cluster",status="True",type="Stalled"} 1.777e+09
aicr_planner_runtime_condition_transition_timestamp_seconds{reason="RollingOut",runtime="cluster",status="False",type="Ready"} 1.777e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "aicr_planner_runtime_condition", "aicr_planner_runtime_condition_transition_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}

func sampleSum(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	var sum float64
	for _, h := range histograms(t, reg, name) {
		sum += h.GetSampleSum()
	}
	return sum
}

func sampleCount(t *testing.T, reg prometheus.Gatherer, name string) uint64 {
	t.Helper()
	var n uint64
	for _, h := range histograms(t, reg, name) {
		n += h.GetSampleCount()
	}
	return n
}

func histograms(t *testing.T, reg prometheus.Gatherer, name string) []interface {
	GetSampleSum() float64
	GetSampleCount() uint64
} {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []interface {
		GetSampleSum() float64
		GetSampleCount() uint64
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			out = append(out, m.GetHistogram())
		}
	}
	return out
}
