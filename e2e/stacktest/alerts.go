package stacktest

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/e2e/stack"
)

// Alert is an alert of the chart's PrometheusRule expected to fire: its name and the labels its
// expression gives it (the rule's own labels, such as severity, and namespace are added).
type Alert struct {
	Name   string
	Labels map[string]string
}

// alertHistory is how long the scraped values are taken to have held before the evaluation:
// longer than any rule's `for`, so an alert whose condition holds fires.
const alertHistory = 3 * time.Hour

// CheckAlerts evaluates the chart's alert rules (rendered as installed, with the default
// thresholds) with promtool over one scrape of each running binary, and fails t unless exactly
// want fire. The scrape is what a Prometheus would have stored had every value held for
// alertHistory up to now: each series gets the labels a ServiceMonitor's scrape adds (namespace,
// service, job, pod), and each binary an `up` of 1 (its scrape just succeeded). Each expected
// alert's annotations are its rule's templates filled in with its labels, and each must name
// every label it was given in its summary.
func CheckAlerts(t *testing.T, s *stack.Stack, want ...Alert) {
	t.Helper()
	promtool := charttest.Tool(t, "promtool")
	objs, err := charttest.Render(t, charttest.Release, stack.OperatorNamespace,
		"registry.repository="+charttest.Repository, "metrics.prometheusRule.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	pr := charttest.Find(objs, "PrometheusRule", charttest.Release)
	if pr == nil {
		t.Fatal("the chart renders no PrometheusRule")
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	rules := map[string]map[string]any{}
	for _, g := range groups {
		rs, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rs {
			rule, _ := r.(map[string]any)
			if name, ok := rule["alert"].(string); ok {
				rules[name] = rule
			}
		}
	}

	now := time.Now().Truncate(time.Minute)
	var series []map[string]string
	for _, binary := range stack.Binaries {
		m, err := s.Scrape(t.Context(), binary)
		if err != nil {
			t.Fatal(err)
		}
		target := map[string]string{
			"namespace": stack.OperatorNamespace,
			"service":   charttest.Release + "-" + binary + "-metrics",
			"job":       charttest.Release + "-" + binary + "-metrics",
			"pod":       charttest.Release + "-" + binary + "-0",
		}
		series = append(series, promSeries("up", target, nil, 1))
		for _, name := range slices.Sorted(maps.Keys(m)) {
			series = append(series, familySeries(m[name], target)...)
		}
	}

	type expAlert struct {
		Labels      map[string]string `json:"exp_labels"`
		Annotations map[string]string `json:"exp_annotations"`
	}
	type alertTest struct {
		EvalTime  string     `json:"eval_time"`
		Alertname string     `json:"alertname"`
		ExpAlerts []expAlert `json:"exp_alerts"`
	}
	expected := map[string][]expAlert{}
	for _, w := range want {
		rule := rules[w.Name]
		if rule == nil {
			t.Fatalf("the chart has no alert %s", w.Name)
		}
		labels := map[string]string{"namespace": stack.OperatorNamespace}
		maps.Copy(labels, w.Labels)
		ruleLabels, _ := rule["labels"].(map[string]any)
		for k, v := range ruleLabels {
			labels[k] = fmt.Sprint(v)
		}
		ann := map[string]string{}
		annTemplates, _ := rule["annotations"].(map[string]any)
		for k, v := range annTemplates {
			ann[k] = expandAlertTemplate(t, w.Name+" "+k, fmt.Sprint(v), labels)
		}
		for k, v := range w.Labels {
			if !strings.Contains(ann["summary"], v) {
				t.Errorf("%s: summary %q does not name %s %q", w.Name, ann["summary"], k, v)
			}
		}
		expected[w.Name] = append(expected[w.Name], expAlert{Labels: labels, Annotations: ann})
	}
	var tests []alertTest
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		tests = append(tests, alertTest{EvalTime: alertHistory.String(), Alertname: name, ExpAlerts: append([]expAlert{}, expected[name]...)})
	}

	dir := t.TempDir()
	rulesFile, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	testFile, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":        "1m",
			"start_timestamp": strconv.FormatInt(now.Add(-alertHistory).Unix(), 10),
			"input_series":    series,
			"alert_rule_test": tests,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"rules.yaml": rulesFile, "test.yaml": testFile} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := charttest.Run(t, dir, nil, promtool, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := charttest.Run(t, dir, nil, promtool, "test", "rules", "test.yaml"); err != nil {
		t.Errorf("the alerts over the binaries' series (%d series) are not the ones expected (%v): %v\n%s", len(series), want, err, out)
	}
}

// familySeries turns one scraped family into promtool input series, constant over the history.
func familySeries(mf *dto.MetricFamily, target map[string]string) []map[string]string {
	var out []map[string]string
	name := mf.GetName()
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			out = append(out, promSeries(name, target, labels, m.GetCounter().GetValue()))
		case dto.MetricType_GAUGE:
			out = append(out, promSeries(name, target, labels, m.GetGauge().GetValue()))
		case dto.MetricType_UNTYPED:
			out = append(out, promSeries(name, target, labels, m.GetUntyped().GetValue()))
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				if math.IsInf(b.GetUpperBound(), +1) {
					continue // the +Inf bucket is the count, added below
				}
				out = append(out, promSeries(name+"_bucket", target, withLabel(labels, "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount())))
			}
			out = append(out, promSeries(name+"_bucket", target, withLabel(labels, "le", "+Inf"), float64(h.GetSampleCount())),
				promSeries(name+"_sum", target, labels, h.GetSampleSum()),
				promSeries(name+"_count", target, labels, float64(h.GetSampleCount())))
		case dto.MetricType_SUMMARY:
			sm := m.GetSummary()
			out = append(out, promSeries(name+"_sum", target, labels, sm.GetSampleSum()),
				promSeries(name+"_count", target, labels, float64(sm.GetSampleCount())))
		}
	}
	return out
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := maps.Clone(labels)
	out[k] = v
	return out
}

// promSeries is one promtool input series: name{target labels, then the sample's} holding v
// for the whole history. A sample's own label wins over the target's, as honor_labels does.
func promSeries(name string, target, labels map[string]string, v float64) map[string]string {
	all := maps.Clone(target)
	maps.Copy(all, labels)
	parts := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		parts = append(parts, k+"="+strconv.Quote(all[k]))
	}
	value := strconv.FormatFloat(v, 'g', -1, 64)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return map[string]string{"series": name + "{" + strings.Join(parts, ",") + "}", "values": fmt.Sprintf("_x%d", int(alertHistory/time.Minute))}
	}
	return map[string]string{
		"series": name + "{" + strings.Join(parts, ",") + "}",
		"values": fmt.Sprintf("%s+0x%d", value, int(alertHistory/time.Minute)),
	}
}

// expandAlertTemplate fills in an annotation the way Prometheus does for an alert with labels
// (and the value 1, what the operator's alerts compare to): $labels and $value, Go templates.
func expandAlertTemplate(t *testing.T, what, text string, labels map[string]string) string {
	t.Helper()
	tmpl, err := template.New(what).Option("missingkey=zero").Parse("{{$labels := .Labels}}{{$value := .Value}}" + text)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, struct {
		Labels map[string]string
		Value  float64
	}{labels, 1}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return b.String()
}
