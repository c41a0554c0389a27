package watch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/aicr-run/aicr-operator/readiness/internal/fences"
	"github.com/aicr-run/aicr-operator/readiness/internal/removal"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
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

// TestWatcherReportsEachComponentsLastVerdict proves the per-component gauges follow the
// watcher's state: ready after a ready verdict, not ready naming the open fence (and no fence
// after it that was not judged) after a verdict on a stale status, gone with the Application.
func TestWatcherReportsEachComponentsLastVerdict(t *testing.T) {
	p, cm := testPlan(t)
	app := written(t, p, "r-1/1")
	reg := prometheus.NewPedanticRegistry()
	rec := &bustest.Recorder{Dedupe: true}
	argo := newFakeApps(t, app)
	w := &Watcher{Apps: argo, Settings: testSettings, Publisher: rec, Metrics: NewMetrics(prometheus.WrapRegistererWithPrefix("aicr_", reg)),
		Plans:    plan.NewCache(plan.GetLoader(k8sfake.NewSimpleClientset(cm).CoreV1().ConfigMaps("aicr-system")), 0),
		Removals: &removal.Checker{Rollouts: &fakeRollouts{}}}
	runWatcher(t, w)
	gauges := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "aicr_readiness_component_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 })
	got := gauges()
	if v, ok := got["aicr_readiness_component_ready{release=gpu-operator,runtime=cluster}"]; !ok || v != 1 {
		t.Errorf("after a ready verdict: %v", got)
	}
	if v := got["aicr_readiness_component_fence{fence="+v1alpha1.FenceHealthy+",release=gpu-operator,runtime=cluster,state=Passed}"]; v != 1 {
		t.Errorf("after a ready verdict, no Healthy Passed: %v", got)
	}

	// The next step writes new values: the status describes an earlier spec, not ready.
	app.Annotations[v1alpha1.AnnotationStep] = "r-2/1"
	app.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"replicas":3}`)
	app.ResourceVersion = "2"
	if _, err := argo.Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "the verdict of step r-2/1", func(s []bustest.Sent) bool {
		vs := verdicts(s)
		return len(vs) == 2
	})
	v := verdicts(s)[1]
	got = gauges()
	if r := got["aicr_readiness_component_ready{release=gpu-operator,runtime=cluster}"]; r != 0 {
		t.Errorf("after a verdict that is not ready, ready = %v", r)
	}
	open := 0
	for _, f := range v.Fences {
		key := "aicr_readiness_component_fence{fence=" + f.Name + ",release=gpu-operator,runtime=cluster,state=" + string(f.State) + "}"
		_, shown := got[key]
		if shown != v1alpha1.FenceJudged(f) {
			t.Errorf("fence %s %s (%q): shown %v, want it shown only when judged", f.Name, f.State, f.Message, shown)
		}
		if shown && f.State != v1alpha1.FencePassed {
			open++
		}
	}
	if open != 1 {
		t.Errorf("%d fences not passed shown, want the one that holds the verdict back: %v", open, got)
	}

	if err := argo.Delete(context.Background(), app.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "the Deleted report", func(s []bustest.Sent) bool {
		return slices.ContainsFunc(drifts(s), func(d *bus.DriftReport) bool { return slices.Contains(d.Kinds, bus.DriftDeleted) })
	})
	if got := gauges(); len(got) != 0 {
		t.Errorf("after the Application's deletion: %v", got)
	}
}
