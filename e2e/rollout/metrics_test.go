//go:build e2e

package rollout

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// settleTimeout bounds the wait for the gauges that follow the rollout (the consumers' backlog
// drained, the runtime's conditions in the planner's cache).
const settleTimeout = time.Minute

// series is one expectation on a binary's scrape: the sum of name's samples matching labels is
// checked by ok (a histogram's name_count or name_sum adds up its counts or sums).
type series struct {
	name   string
	labels map[string]string
	ok     func(v float64) bool
	want   string
}

// selector prints labels the way PromQL reads them: {a="b",c="d"}.
func selector(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func atLeast(name string, labels map[string]string, n float64) series {
	return series{name, labels, func(v float64) bool { return v >= n }, fmt.Sprintf(">= %v", n)}
}

func equal(name string, labels map[string]string, n float64) series {
	return series{name, labels, func(v float64) bool { return v == n }, fmt.Sprintf("= %v", n)}
}

func between(name string, labels map[string]string, lo, hi float64) series {
	return series{name, labels, func(v float64) bool { return v >= lo && v <= hi }, fmt.Sprintf("in [%v, %v]", lo, hi)}
}

// TestEveryBinaryReportsTheRollout rolls the example bundle out with the real Argo CD and then
// scrapes each of the five binaries: every metric an on-call engineer reads to follow a rollout
// exists and holds a value the rollout explains (steps started and succeeded by action, their
// durations, the step-advance latency, the rollout's outcome, the runtime's conditions, the
// verdicts by fence, the watch lag, the applier's results, the bus counts and the durable
// consumers' backlog drained to zero, credentials and admission, ready and leading).
func TestEveryBinaryReportsTheRollout(t *testing.T) {
	s := stacktest.Need(t)
	began := time.Now()
	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	rt := stacktest.RolledOut(t, s, bundle, stack.DefaultRuntimeSpec())
	ro, err := s.Rollout(t.Context(), rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(len(ro.Status.Steps))
	install := map[string]string{"action": string(v1alpha1.ActionInstall)}
	lbl := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	up := func(binary string) []series {
		return []series{
			equal("aicr_ready", lbl("binary", binary), 1),
			equal("aicr_leader", lbl("binary", binary), 1),
			atLeast("go_goroutines", nil, 1),
		}
	}
	want := map[string][]series{
		"planner": append(up("planner"),
			atLeast("aicr_planner_steps_started_total", install, n),
			atLeast("aicr_planner_steps_succeeded_total", install, n),
			atLeast("aicr_planner_step_duration_seconds_count", lbl("action", "Install", "result", "succeeded"), n),
			between("aicr_planner_step_duration_seconds_sum", lbl("result", "succeeded"), 0.001, float64(stacktest.RolloutTimeout/time.Second)*n),
			atLeast("aicr_planner_step_advance_seconds_count", nil, 1),
			atLeast("aicr_planner_release_steps_total", lbl("runtime", rt.Name, "result", "succeeded"), n),
			equal("aicr_planner_release_steps_total", lbl("result", "failed"), 0),
			atLeast("aicr_planner_release_step_duration_seconds_count", lbl("runtime", rt.Name, "result", "succeeded"), n),
			atLeast("aicr_planner_rollouts_total", lbl("outcome", v1alpha1.OutcomeSucceeded), 1),
			atLeast("aicr_planner_rollout_duration_seconds_count", lbl("outcome", v1alpha1.OutcomeSucceeded), 1),
			equal("aicr_planner_runtime_condition", lbl("runtime", rt.Name, "type", v1alpha1.ConditionReady, "status", "True", "reason", v1alpha1.ReasonRolledOut), 1),
			between("aicr_planner_runtime_condition_transition_timestamp_seconds", lbl("type", v1alpha1.ConditionReady, "status", "True"),
				float64(began.Add(-time.Hour).Unix()), float64(time.Now().Add(time.Minute).Unix())),
			atLeast("aicr_bus_published_total", lbl("binary", "planner", "type", bus.TypeApplyCommand, "result", "ok"), n),
			atLeast("aicr_bus_messages_total", lbl("binary", "planner", "type", bus.TypeReleaseVerdict, "result", "ack"), n),
			atLeast("aicr_bus_messages_total", lbl("binary", "planner", "type", bus.TypeApplyResult, "result", "ack"), n),
			equal("aicr_bus_consumer_pending_messages", lbl("binary", "planner", "consumer", bus.ConsumerPlanner, "stream", bus.StreamEvents), 0),
			equal("aicr_bus_consumer_ack_pending_messages", lbl("binary", "planner", "consumer", bus.ConsumerPlanner), 0),
			atLeast("aicr_bus_consumer_redelivered_messages", lbl("binary", "planner"), 0),
		),
		"applier": append(up("applier"),
			atLeast("aicr_applier_results_total", install, n),
			atLeast("aicr_bus_handle_seconds_count", lbl("binary", "applier", "type", bus.TypeApplyCommand), n),
			atLeast("aicr_bus_published_total", lbl("binary", "applier", "type", bus.TypeApplyResult, "result", "ok"), n),
			equal("aicr_bus_consumer_pending_messages", lbl("binary", "applier", "consumer", bus.ConsumerApplier, "stream", bus.StreamCommands), 0),
			equal("aicr_bus_consumer_ack_pending_messages", lbl("binary", "applier", "consumer", bus.ConsumerApplier), 0),
		),
		"readiness": append(up("readiness"),
			atLeast("aicr_readiness_verdicts_total", lbl("result", "ready"), n),
			atLeast("aicr_readiness_verdict_fences_total", lbl("fence", v1alpha1.FenceHealthy, "state", string(v1alpha1.FencePassed)), n),
			atLeast("aicr_readiness_verdict_fences_total", lbl("state", string(v1alpha1.FenceOpen)), 1),
			atLeast("aicr_readiness_watch_lag_seconds_count", nil, 1),
			equal("aicr_readiness_component_ready", lbl("runtime", rt.Name), n), // every release ready
			equal("aicr_readiness_component_fence", lbl("runtime", rt.Name, "fence", v1alpha1.FenceHealthy, "state", string(v1alpha1.FencePassed)), n),
			atLeast("aicr_readiness_queue_depth", nil, 0),
			atLeast("aicr_bus_published_total", lbl("binary", "readiness", "type", bus.TypeReleaseVerdict, "result", "ok"), n),
		),
		"credrefresher": append(up("credrefresher"),
			equal("aicr_credrefresher_credentials_ok", nil, 1),
			between("aicr_credrefresher_last_success_timestamp_seconds", nil, float64(began.Add(-time.Hour).Unix()), float64(time.Now().Add(time.Minute).Unix())),
			atLeast("aicr_credrefresher_token_expiry_timestamp_seconds", nil, 0), // static mode: no token, no expiry
			atLeast("aicr_bus_published_total", lbl("binary", "credrefresher", "type", bus.TypeCredentialsStatus, "result", "ok"), 1),
		),
		"admission": append(up("admission"),
			atLeast("aicr_admission_requests_total", lbl("allowed", "true"), n),
			atLeast("aicr_admission_decision_duration_seconds_count", nil, n),
		),
	}
	for _, binary := range stack.Binaries {
		t.Run(binary, func(t *testing.T) {
			var last []string
			err := testenv.WaitFor(t.Context(), settleTimeout, binary+"'s metrics", func(ctx context.Context) (bool, error) {
				m, err := s.Scrape(ctx, binary)
				if err != nil {
					return false, err
				}
				last = last[:0]
				for _, e := range want[binary] {
					v, ok := m.Sum(e.name, e.labels)
					switch {
					case !ok:
						last = append(last, fmt.Sprintf("%s%s: no series", e.name, selector(e.labels)))
					case !e.ok(v):
						last = append(last, fmt.Sprintf("%s%s = %v, want %s", e.name, selector(e.labels), v, e.want))
					}
				}
				return len(last) == 0, nil
			})
			if err != nil {
				t.Errorf("%v:\n  %s", err, strings.Join(last, "\n  "))
			}
		})
	}
	// Every metric the chart's dashboard and alerts read is one the running binaries export.
	exported := stack.Metrics{}
	for _, binary := range stack.Binaries {
		m, err := s.Scrape(t.Context(), binary)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(exported, m)
	}
	root, err := stack.ChartsDir()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(filepath.Dir(filepath.Dir(root)), "deploy", "charts", "aicr-operator")
	for _, f := range []string{filepath.Join(chart, "files", "dashboards", "aicr-operator.json"), filepath.Join(chart, "templates", "prometheusrule.yaml")} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`\baicr_[a-z0-9_]+\b`).FindAllString(string(raw), -1)
		if len(names) == 0 {
			t.Errorf("%s names no aicr_ metric", filepath.Base(f))
		}
		for _, n := range names {
			if !exported.Has(n) {
				t.Errorf("%s reads %s, which no binary exports", filepath.Base(f), n)
			}
		}
	}

	// The latency of advancing from a verdict to the next command is the planner's own work: a
	// few milliseconds, far below a step's duration.
	m, err := s.Scrape(t.Context(), "planner")
	if err != nil {
		t.Fatal(err)
	}
	count, _ := m.Sum("aicr_planner_step_advance_seconds_count", nil)
	sum, _ := m.Sum("aicr_planner_step_advance_seconds_sum", nil)
	if count == 0 || sum/count > 5 {
		t.Errorf("step advance: %v observations, mean %vs; want some, each well under 5s", count, sum/max(count, 1))
	}
}
