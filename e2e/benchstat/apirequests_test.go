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
		t.Errorf("read %d counts, %d timed, %d sums; want 3, 2, 2 (comments skipped)", len(r.Count), len(r.Timed), len(r.Seconds))
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

// histogram is the APPLY histogram of a reading: cumulative counts at 5, 25 and 50 ms and +Inf.
func histogram(c5, c25, c50, inf float64) APIRequests {
	r := ParseAPIRequests(nil)
	r.Buckets["APPLY applications"] = map[float64]float64{0.005: c5, 0.025: c25, 0.05: c50, math.Inf(1): inf}
	return r
}

// The median is read as Prometheus's histogram_quantile reads it, from the requests between the
// two readings: linearly inside the bucket that holds the middle request.
func TestMedianMillisInterpolatesInTheBucketOfTheMiddleRequest(t *testing.T) {
	before := histogram(100, 100, 100, 100) // earlier requests, all under 5 ms: not counted
	for _, c := range []struct {
		name  string
		after APIRequests
		want  float64
	}{
		// 10 new requests, 0 under 5 ms, 10 under 25: the 5th of 10 in 5–25 ms is at 15 ms.
		{"inside the second bucket", histogram(100, 110, 110, 110), 15},
		// 4 under 5 ms, 8 under 25: the 5th is the 1st of the 4 in 5–25 ms, 5 + 20/4.
		{"past the first bucket", histogram(104, 108, 110, 110), 10},
		// All 10 under 5 ms: from 0 to 5 ms, the middle at 2.5.
		{"the first bucket", histogram(110, 110, 110, 110), 2.5},
		// 6 of 10 above the last finite bound: that bound.
		{"beyond the last bound", histogram(101, 102, 104, 110), 50},
	} {
		got, ok := MedianMillis(before, c.after, "APPLY applications")
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: MedianMillis = %v, %t; want %v, true", c.name, got, ok, c.want)
		}
	}
	if _, ok := MedianMillis(before, before, "APPLY applications"); ok {
		t.Error("MedianMillis of no requests in between: reported one")
	}
	if _, ok := MedianMillis(before, histogram(110, 110, 110, 110), "PUT applications"); ok {
		t.Error("MedianMillis of a key never timed: reported one")
	}
}

func TestParseAPIRequestsReadsTheHistogramsBuckets(t *testing.T) {
	r := ParseAPIRequests([]byte(metricsBefore))
	if got := r.Buckets["APPLY applications"][0.005]; got != 4 {
		t.Errorf("Buckets[APPLY applications][0.005] = %v, want 4", got)
	}
}
