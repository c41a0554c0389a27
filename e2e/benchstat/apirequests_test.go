package benchstat

import (
	"math"
	"testing"
)

// Lines of a kube-apiserver v1.37 /metrics, cut down: two codes of one verb and resource, a
// subresource, a histogram's buckets (skipped), a WATCH that is counted but never timed.
const metricsBefore = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 10
apiserver_request_total{code="409",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 3
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1",le="0.005"} 4
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 0.096
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 12
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 0.02
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 5
`

const metricsAfter = `apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 35
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 3
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 0.336
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 42
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 0.14
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="operator.aicr.run",resource="runtimerollouts",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 35
`

func TestParseAPIRequestsSumsCodesAndKeysSubresources(t *testing.T) {
	r := ParseAPIRequests([]byte(metricsBefore))
	for key, want := range map[string]float64{"APPLY applications": 12, "PUT runtimerollouts/status": 5, "WATCH applications": 3} {
		if got := r.Count[key]; got != want {
			t.Errorf("Count[%q] = %v, want %v", key, got, want)
		}
	}
	if got := r.Timed["APPLY applications"]; got != 12 {
		t.Errorf("Timed[APPLY applications] = %v, want 12", got)
	}
	if got := r.Seconds["PUT runtimerollouts/status"]; got != 0.02 {
		t.Errorf("Seconds[PUT runtimerollouts/status] = %v, want 0.02", got)
	}
	if _, ok := r.Timed["WATCH applications"]; ok {
		t.Error("a WATCH is not in the duration histogram, yet it was read as timed")
	}
	if len(r.Count) != 3 || len(r.Timed) != 2 || len(r.Seconds) != 2 {
		t.Errorf("read %d counts, %d timed, %d sums; want 3, 2, 2 (buckets and comments skipped)", len(r.Count), len(r.Timed), len(r.Seconds))
	}
}

// The mean is that of the requests between the two readings, not since the server started.
func TestMeanMillisIsOfTheRequestsBetweenTwoReadings(t *testing.T) {
	before, after := ParseAPIRequests([]byte(metricsBefore)), ParseAPIRequests([]byte(metricsAfter))
	for key, want := range map[string]float64{"APPLY applications": 8, "PUT runtimerollouts/status": 4} {
		got, ok := MeanMillis(before, after, key)
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("MeanMillis(%q) = %v, %t; want %v, true", key, got, ok, want)
		}
	}
	if _, ok := MeanMillis(before, after, "WATCH applications"); ok {
		t.Error("MeanMillis of a request kind never timed said it had a mean")
	}
}
