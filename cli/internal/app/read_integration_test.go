//go:build integration

package app

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// describe shows the steps, each fence, the approval and what to do, in every format.
func TestDescribe(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-describe", time.Now()))
	checkFormats(t, env, []string{"describe", "r-describe"}, map[string]formatCase{
		"text": {nil, []string{
			"Name:", "r-describe", "Phase:", "AwaitingApproval", "Progress:", "step 1/2 gpu-operator (Upgrade)",
			"none: 1 Remove step(s) need one (kubectl aicr approve r-describe --reason TEXT)",
			"gpu-operator", "dcgm-exporter", "Remove",
			"[x] ComparedToSpec", "[ ] SyncedAfterStep", "operation still Running", "[ ] Healthy",
		}},
		"json":        {[]string{"-o", "json"}, []string{`"kind": "RuntimeRollout"`, `"name": "r-describe"`, `"phase": "AwaitingApproval"`}},
		"yaml":        {[]string{"-o", "yaml"}, []string{"kind: RuntimeRollout", "  name: r-describe", "phase: AwaitingApproval"}},
		"name":        {[]string{"-o", "name"}, []string{"runtimerollout.operator.aicr.run/r-describe\n"}},
		"jsonpath":    {[]string{"-o", "jsonpath={.status.steps[1].release}"}, []string{"dcgm-exporter"}},
		"go-template": {[]string{"-o", "go-template={{range .status.steps}}{{.index}}={{.state}};{{end}}"}, []string{"1=InProgress;2=AwaitingApproval;"}},
	})
	// JSON is the object the API server holds, without managedFields unless asked for.
	_, stdout, _ := kubectl(t, env, "describe", "r-describe", "-o", "json")
	if m := mustJSON(t, stdout); m["apiVersion"] != "operator.aicr.run/v1alpha1" || strings.Contains(stdout, "managedFields") {
		t.Errorf("describe -o json:\n%s", stdout)
	}
	if _, stdout, _ := kubectl(t, env, "describe", "r-describe", "-o", "json", "--show-managed-fields"); !strings.Contains(stdout, "managedFields") {
		t.Errorf("--show-managed-fields dropped them")
	}
}

// status shows the runtime and its rollout, in every format.
func TestStatus(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-status-once", time.Now()))
	ensureRuntime(t, env, "gpu-stack")
	setRuntimeStatus(t, env, rollingOut("r-status-once"))
	checkFormats(t, env, []string{"status"}, map[string]formatCase{
		"text": {nil, []string{"runtime cluster: Ready=False RollingOut", "desired plan: " + digestB,
			"rollout r-status-once: AwaitingApproval, step 1/2 gpu-operator (Upgrade)",
			"step 2/2 dcgm-exporter (Remove) awaits approval: kubectl aicr approve r-status-once"}},
		"json":        {[]string{"-o", "json"}, []string{`"kind": "List"`, `"kind": "ClusterRuntime"`, `"kind": "RuntimeRollout"`}},
		"yaml":        {[]string{"-o", "yaml"}, []string{"kind: List", "- apiVersion: operator.aicr.run/v1alpha1"}},
		"name":        {[]string{"-o", "name"}, []string{"clusterruntime.operator.aicr.run/cluster\nruntimerollout.operator.aicr.run/r-status-once\n"}},
		"jsonpath":    {[]string{"-o", `jsonpath={.items[0].status.conditions[?(@.type=="Ready")].reason}`}, []string{"RollingOut"}},
		"go-template": {[]string{"-o", "go-template={{range .items}}{{.kind}} {{end}}"}, []string{"ClusterRuntime RuntimeRollout "}},
	})
}

// status --watch follows a watch, prints one line per change when the output is not a terminal,
// and ends when the runtime is Ready.
func TestStatusWatchPrintsOneLinePerChange(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-status", time.Now()))
	ensureRuntime(t, env, "gpu-stack")
	setRuntimeStatus(t, env, rollingOut("r-status"))

	stdout, stderr, done := background(t, env, "status", "--watch")
	waitOutput(t, stdout, "status shows the blocking step", func(s string) bool {
		return strings.Contains(s, "waiting for SyncedAfterStep: operation still Running")
	})
	for _, want := range []string{"runtime cluster: Ready=False RollingOut: step 1/2 gpu-operator (Upgrade)",
		"rollout r-status: AwaitingApproval, 0/2 steps succeeded, step 1/2 gpu-operator (Upgrade)",
		"step 1/2 gpu-operator (Upgrade) InProgress; waiting for SyncedAfterStep: operation still Running; Healthy: Progressing",
		"step 2/2 dcgm-exporter (Remove) AwaitingApproval: kubectl aicr approve r-status --reason TEXT"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status --watch lacks %q:\n%s", want, stdout.String())
		}
	}
	before := strings.Count(stdout.String(), "\n")

	// A step moves: exactly the lines of what changed are printed.
	setRolloutStatus(t, dyn, "r-status", func(s *v1alpha1.RuntimeRolloutStatus) {
		s.Steps[0].State = v1alpha1.StepSucceeded
		s.Steps[0].FinishedAt = s.Steps[0].StartedAt
	})
	waitOutput(t, stdout, "the step's line", func(s string) bool { return strings.Contains(s, "step 1/2 gpu-operator (Upgrade) Succeeded in 0s") })
	waitOutput(t, stdout, "the rollout's line", func(s string) bool { return strings.Contains(s, "1/2 steps succeeded") })
	if added := strings.Count(stdout.String(), "\n") - before; added != 2 {
		t.Errorf("%d lines for one step change, want 2 (the step and the rollout):\n%s", added, stdout.String())
	}
	select {
	case code := <-done:
		t.Fatalf("status --watch returned %d before the runtime was Ready", code)
	default:
	}
	setRuntimeStatus(t, env, rolledOut("r-status"))
	if code := waitExit(t, done, stdout, stderr); code != 0 {
		t.Errorf("status --watch exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "runtime cluster: Ready=True RolledOut: rolled out") {
		t.Errorf("the last lines do not show Ready:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "\x1b[") {
		t.Errorf("escape sequences in the output of a pipe:\n%q", stdout.String())
	}
}

// status --watch waits for a runtime that does not exist yet, and -o prints the objects on each
// change.
func TestStatusWatchBeforeTheRuntimeExists(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	deleteRuntime(t, env)
	createRollout(t, dyn, removeRollout("r-later", time.Now()))
	stdout, stderr, done := background(t, env, "status", "--watch", "-o", "name")
	lines, _, _ := background(t, env, "status", "-w")
	waitOutput(t, lines, "the runtime is missing", func(s string) bool { return strings.Contains(s, "clusterruntime cluster: not found yet") })
	ensureRuntime(t, env, "gpu-stack")
	setRuntimeStatus(t, env, rollingOut("r-later"))
	waitOutput(t, stdout, "the objects' names", func(s string) bool {
		return strings.Contains(s, "clusterruntime.operator.aicr.run/cluster\nruntimerollout.operator.aicr.run/r-later\n")
	})
	waitOutput(t, lines, "the runtime's line", func(s string) bool { return strings.Contains(s, "runtime cluster: Ready=False RollingOut") })
	setRuntimeStatus(t, env, rolledOut("r-later"))
	if code := waitExit(t, done, stdout, stderr); code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// describe --watch follows one rollout until it ends.
func TestDescribeWatchEndsWithTheRollout(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-describe-watch", time.Now()))
	stdout, stderr, done := background(t, env, "describe", "r-describe-watch", "--watch")
	waitOutput(t, stdout, "the steps", func(s string) bool { return strings.Contains(s, "step 2/2 dcgm-exporter (Remove) AwaitingApproval") })
	setRolloutStatus(t, dyn, "r-describe-watch", func(s *v1alpha1.RuntimeRolloutStatus) {
		s.Phase, s.Outcome, s.Message = v1alpha1.PhaseRevoked, v1alpha1.OutcomeRevoked, "the approval was revoked"
	})
	if code := waitExit(t, done, stdout, stderr); code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "rollout r-describe-watch: Revoked, 0/2 steps succeeded") || !strings.Contains(stdout.String(), "outcome RolloutRevoked") {
		t.Errorf("the end is not shown:\n%s", stdout.String())
	}
}

// graph draws the rollout's plan with its steps; without the plan, the steps alone.
func TestGraph(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	p := storePlan(t, env, exampleBundle(t), nil)
	steps := plan.Steps(nil, p, plan.StepOptions{})
	for i := range steps {
		switch {
		case i < 4:
			steps[i].State = v1alpha1.StepSucceeded
		case steps[i].Release == "gpu-operator":
			steps[i].State = v1alpha1.StepInProgress
		}
	}
	createRollout(t, dyn, &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "r-graph"},
		Spec:       v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "uid-1", ToDigest: p.Digest()},
		Status:     v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseProgressing, Steps: steps},
	})
	checkFormats(t, env, []string{"graph", "r-graph"}, map[string]formatCase{
		"text": {nil, []string{"rollout r-graph: 4/9 steps succeeded", "1 ┬ ✓ cert-manager", "2 ┬ ● gpu-operator",
			"InProgress", "← cert-manager, kube-prometheus-stack, nfd, nodewright-customizations"}},
		"dot":         {[]string{"-o", "dot"}, []string{"digraph rollout {", `"gpu-operator" [label="gpu-operator\n#5 Install · InProgress"`, `"jobset" -> "kubeflow-trainer";`}},
		"mermaid":     {[]string{"-o", "mermaid"}, []string{"flowchart LR", `["gpu-operator<br/>#5 Install · InProgress"]:::sInProgress`}},
		"json":        {[]string{"-o", "json"}, []string{`"title": "rollout r-graph"`, `"succeeded": 4`, `"state": "InProgress"`}},
		"yaml":        {[]string{"-o", "yaml"}, []string{"title: rollout r-graph", "- from: cert-manager"}},
		"name":        {[]string{"-o", "name"}, []string{"runtimerollout.operator.aicr.run/r-graph\n"}},
		"jsonpath":    {[]string{"-o", "jsonpath={.nodes[?(@.state==\"InProgress\")].name}"}, []string{"gpu-operator"}},
		"go-template": {[]string{"-o", "go-template={{range .nodes}}{{if eq .layer 0}}{{.name}} {{end}}{{end}}"}, []string{"cert-manager kube-prometheus-stack nfd nodewright-customizations "}},
	})

	// The plan ConfigMap is elsewhere: the steps alone are drawn, with a warning.
	code, stdout, stderr := kubectl(t, env, "graph", "r-graph", "-n", "elsewhere")
	if code != 0 || !strings.Contains(stderr, "warning: get plan "+p.Digest()) || !strings.Contains(stdout, "rollout r-graph: 4/9 steps succeeded") {
		t.Errorf("graph without its plan: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// wait ends as soon as the state is there, fails at the timeout saying what it saw, and fails at
// once when the rollout to the desired plan failed.
func TestWait(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-wait", time.Now()))
	ensureRuntime(t, env, "gpu-stack")
	setRuntimeStatus(t, env, rollingOut("r-wait"))

	code, _, stderr := kubectl(t, env, "wait", "--for=ready", "--timeout=2s")
	if code != 1 || !strings.Contains(stderr, "timed out after 2s waiting for ready; last seen: clusterruntime cluster: Ready=False RollingOut") {
		t.Errorf("wait past its timeout: exit %d, %q", code, stderr)
	}
	code, _, stderr = kubectl(t, env, "wait", "--for=ready", "--timeout=0")
	if code != 1 || !strings.Contains(stderr, "ready is not met") {
		t.Errorf("wait --timeout=0: exit %d, %q", code, stderr)
	}

	stdout, errOut, done := background(t, env, "wait", "--for=ready", "--timeout=1m")
	cond, _, condDone := background(t, env, "wait", "--for=condition=Stalled=False", "--timeout=1m")
	setRuntimeStatus(t, env, rolledOut("r-wait"))
	if code := waitExit(t, done, stdout, errOut); code != 0 || !strings.Contains(stdout.String(), "clusterruntime cluster: ready met") {
		t.Errorf("wait --for=ready: exit %d\n%s\n%s", code, stdout.String(), errOut.String())
	}
	st := rolledOut("r-wait")
	st.Conditions = append(st.Conditions, condition(v1alpha1.ConditionStalled, "False", v1alpha1.ReasonNotStalled, ""))
	setRuntimeStatus(t, env, st)
	if code := waitExit(t, condDone, cond, errOut); code != 0 || !strings.Contains(cond.String(), "condition Stalled=False met") {
		t.Errorf("wait --for=condition: exit %d\n%s", code, cond.String())
	}

	// The rollout to the desired plan failed: Ready cannot come, wait says so at once.
	setRuntimeStatus(t, env, rollingOut("r-wait"))
	setRolloutStatus(t, dyn, "r-wait", func(s *v1alpha1.RuntimeRolloutStatus) {
		s.Phase, s.Outcome, s.Message = v1alpha1.PhaseFailed, v1alpha1.OutcomeFailed, "step 1 passed its action timeout"
	})
	code, _, stderr = kubectl(t, env, "wait", "--for=ready", "--timeout=1m")
	if code != 1 || !strings.Contains(stderr, "rollout r-wait ended RolloutFailed: step 1 passed its action timeout") {
		t.Errorf("wait for a failed rollout: exit %d, %q", code, stderr)
	}
	code, stdout2, stderr := kubectl(t, env, "wait", "r-wait", "--for=outcome")
	if code != 0 || !strings.Contains(stdout2, "runtimerollout r-wait: an outcome met") {
		t.Errorf("wait --for=outcome: exit %d, %q %q", code, stdout2, stderr)
	}
	code, _, stderr = kubectl(t, env, "wait", "r-wait", "--for=outcome=RolloutSucceeded")
	if code != 1 || !strings.Contains(stderr, "rollout r-wait ended RolloutFailed, not RolloutSucceeded") {
		t.Errorf("wait for another outcome: exit %d, %q", code, stderr)
	}
	for args, want := range map[string]string{
		"wait":                             "--for is required",
		"wait --for=soon":                  `--for "soon": use ready, condition=TYPE[=STATUS]`,
		"wait --for=condition=Ready=Maybe": "the status must be True, False or Unknown",
		"wait r-wait --for=ready":          "a rollout name goes with --for=outcome only",
	} {
		code, _, stderr := kubectl(t, env, strings.Fields(args)...)
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want an error with %q", args, code, stderr, want)
		}
	}
}
