package benchstat

import (
	"bufio"
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
)

// APIRequests is what a kube-apiserver's /metrics says of the requests it served so far, keyed
// by "<verb> <resource>" ("PUT runtimerollouts/status" with a subresource): how many
// (apiserver_request_total), and of those its request-duration histogram times (every request
// but long-running ones: WATCH, and a connect) how many and in how many seconds
// (apiserver_request_duration_seconds_count and _sum), and how many in each bucket of that
// histogram (Buckets: upper bound in seconds → cumulative count). Each sums every other label
// (code, component, scope, group, version).
type APIRequests struct {
	Count, Timed, Seconds map[string]float64
	Buckets               map[string]map[float64]float64
}

// ParseAPIRequests reads APIRequests from the Prometheus text of a kube-apiserver's /metrics.
// Lines it does not know are skipped.
func ParseAPIRequests(metrics []byte) APIRequests {
	out := APIRequests{Count: map[string]float64{}, Timed: map[string]float64{}, Seconds: map[string]float64{}, Buckets: map[string]map[float64]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		var into map[string]float64
		switch name {
		case "apiserver_request_duration_seconds_bucket":
			labels, value, ok := strings.Cut(rest, "} ")
			if !ok {
				continue
			}
			le, ok := labelValue(labels, "le")
			if !ok {
				continue
			}
			bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
			v, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err1 != nil || err2 != nil {
				continue
			}
			key := requestKey(labels)
			if out.Buckets[key] == nil {
				out.Buckets[key] = map[float64]float64{}
			}
			out.Buckets[key][bound] += v
			continue
		case "apiserver_request_total":
			into = out.Count
		case "apiserver_request_duration_seconds_count":
			into = out.Timed
		case "apiserver_request_duration_seconds_sum":
			into = out.Seconds
		default:
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		into[requestKey(labels)] += v
	}
	return out
}

// labelValue is the value of label name in a metric's labels.
func labelValue(labels, name string) (string, bool) {
	for kv := range strings.SplitSeq(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// requestKey is "<verb> <resource>[/<subresource>]" of a metric's labels (label values of these
// metrics hold no comma or quote).
func requestKey(labels string) string {
	var resource, sub, verb string
	for kv := range strings.SplitSeq(labels, ",") {
		k, v, _ := strings.Cut(kv, "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "resource":
			resource = v
		case "subresource":
			sub = v
		case "verb":
			verb = v
		}
	}
	if sub != "" {
		resource += "/" + sub
	}
	return verb + " " + resource
}

// MeanMillis is the API server's mean time per request of key between two readings, in
// milliseconds, and whether it timed any.
func MeanMillis(before, after APIRequests, key string) (float64, bool) {
	n := after.Timed[key] - before.Timed[key]
	if n <= 0 {
		return 0, false
	}
	return 1000 * (after.Seconds[key] - before.Seconds[key]) / n, true
}

// MedianMillis is the API server's median time per request of key between two readings, in
// milliseconds, from its request-duration histogram as Prometheus's histogram_quantile reads
// one: the bucket that holds the middle request, linearly within it (from 0 in the first). The
// buckets are coarse (5, 25, 50, 100 ms ...): a median inside one is an estimate. It also says
// whether the histogram timed any request of key in between.
func MedianMillis(before, after APIRequests, key string) (float64, bool) {
	return QuantileMillis(before, after, key, 0.5)
}

// QuantileMillis is MedianMillis for quantile q (0 < q < 1).
func QuantileMillis(before, after APIRequests, key string, q float64) (float64, bool) {
	a := after.Buckets[key]
	if len(a) == 0 {
		return 0, false
	}
	bounds := make([]float64, 0, len(a))
	for b := range a {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	counts := make([]float64, len(bounds))
	for i, b := range bounds {
		counts[i] = a[b] - before.Buckets[key][b]
	}
	total := counts[len(counts)-1] // +Inf: every request
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range bounds {
		if counts[i] >= rank {
			if math.IsInf(b, 1) {
				return 1000 * lower, true // above the last finite bound: that bound, as Prometheus does
			}
			in := counts[i] - below
			if in <= 0 {
				return 1000 * b, true
			}
			return 1000 * (lower + (b-lower)*(rank-below)/in), true
		}
		lower, below = b, counts[i]
	}
	return 1000 * lower, true
}
