package stack

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricsURL is the /metrics URL of a running binary (its --metrics-addr).
func (s *Stack) MetricsURL(binary string) (string, error) {
	s.mu.Lock()
	cmd := s.procs[binary]
	s.mu.Unlock()
	if cmd == nil {
		return "", fmt.Errorf("%s is not running", binary)
	}
	for _, a := range cmd.Args {
		if addr, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			return "http://" + addr + "/metrics", nil
		}
	}
	return "", fmt.Errorf("%s runs without --metrics-addr", binary)
}

// Metrics is one scrape of a binary's /metrics.
type Metrics map[string]*dto.MetricFamily

// Scrape reads a running binary's /metrics.
func (s *Stack) Scrape(ctx context.Context, binary string) (Metrics, error) {
	url, err := s.MetricsURL(binary)
	if err != nil {
		return nil, err
	}
	return ScrapeURL(ctx, binary, url)
}

// ScrapeURL reads the /metrics at url, of the process named name (for errors).
func ScrapeURL(ctx context.Context, name, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", name, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the metrics of %s: %w", name, err)
	}
	return Metrics(mfs), nil
}

// Has reports whether a sample name is exported: a family, or a histogram's name_bucket,
// name_sum or name_count.
func (m Metrics) Has(name string) bool {
	if m[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && m[base] != nil && m[base].GetType() == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// Sum adds up the samples of name whose labels include every pair of match: a counter's or a
// gauge's value, a histogram's count (with name_count) or sum (name_sum). ok is false when no
// sample matched.
func (m Metrics) Sum(name string, match map[string]string) (sum float64, ok bool) {
	family, part := name, ""
	for _, suffix := range []string{"_count", "_sum"} {
		if base, found := strings.CutSuffix(name, suffix); found && m[base] != nil && m[base].GetType() == dto.MetricType_HISTOGRAM {
			family, part = base, suffix
		}
	}
	mf := m[family]
	if mf == nil {
		return 0, false
	}
samples:
	for _, s := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range match {
			if labels[k] != v {
				continue samples
			}
		}
		ok = true
		switch {
		case part == "_count":
			sum += float64(s.GetHistogram().GetSampleCount())
		case part == "_sum":
			sum += s.GetHistogram().GetSampleSum()
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum, ok
}
