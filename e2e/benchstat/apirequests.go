package benchstat

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// APIRequests is what a kube-apiserver's /metrics says of the requests it served so far, keyed
// by "<verb> <resource>" ("PUT runtimerollouts/status" with a subresource): how many
// (apiserver_request_total), and of those its request-duration histogram times (every request
// but long-running ones: WATCH, and a connect) how many and in how many seconds
// (apiserver_request_duration_seconds_count and _sum). Each sums every other label (code,
// component, scope, group, version).
type APIRequests struct {
	Count, Timed, Seconds map[string]float64
}

// ParseAPIRequests reads APIRequests from the Prometheus text of a kube-apiserver's /metrics.
// Lines it does not know are skipped.
func ParseAPIRequests(metrics []byte) APIRequests {
	out := APIRequests{Count: map[string]float64{}, Timed: map[string]float64{}, Seconds: map[string]float64{}}
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
