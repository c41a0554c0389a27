//go:build chaos || e2e

package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// The real-Argo CD variant (-chaos.argocd, make chaos-argocd): rollouts through Argo CD v3.4.2,
// kwok and a registry while faults hit the operator and Argo CD, with charts whose syncs are
// slow and bundles whose chart Argo CD cannot render.

// The runtime's action timeout, set before each bundle. A good step takes seconds, but a
// repo-server killed during a sync fails that attempt (Argo CD reports a ComparisonError:
// connection refused) and Argo CD tries again only after the retry backoff the operator writes
// into every Application (60 s, then 120 s): a good bundle's steps get minutes, so that only an
// operator that lost a step runs into them. A step on a broken chart never becomes ready (the
// planner fails a step at its action timeout, whatever the fences say), so a broken bundle
// gets a short one; it changes nothing but the broken release, so the broken step is the one
// that fails.
const (
	goodActionTimeout   = 5 * time.Minute
	brokenActionTimeout = 30 * time.Second
	// argoRolloutTimeout bounds a good bundle's rollout: four steps in a row, each possibly held
	// by a retry backoff.
	argoRolloutTimeout = 12 * time.Minute
)

// argoCDFaults are the fault kinds the variant deals unless -chaos.only names others: the
// operator's processes and leaders, NATS, and Argo CD's controller and repo-server.
var argoCDFaults = []string{
	"kill-applier", "pause-applier", "kill-planner-leader", "pause-planner-leader", "kill-readiness-leader",
	"pause-readiness-leader", "kill-nats", "kill-" + testenv.ProcAppController, "kill-" + testenv.ProcRepoServer,
}

// argoChartsDir holds the variant's charts (web, slow, gate) and the broken template.
const argoChartsDir = "../testdata/charts/chaosargocd"

// brokenVersion is the chart version of a release's broken chart.
const brokenVersion = "1.1.0-broken"

// argoRelease is one component of the variant's bundle.
type argoRelease struct {
	name, namespace string
	chart           string // web, slow or gate
	deps            []string
}

func (r argoRelease) gate() bool { return r.chart == "gate" }

// argoReleases: a slow release at the root and one above the gate, a readiness gate, and two
// independent branches so that steps run side by side (parallelism 2).
var argoReleases = []argoRelease{
	{name: "slow-a", namespace: "chaos-argo-a", chart: "slow"},
	{name: "web-b", namespace: "chaos-argo-a", chart: "web"},
	{name: "web-c", namespace: "chaos-argo-b", chart: "web", deps: []string{"slow-a", "web-b"}},
	{name: "gate-d", namespace: "chaos-argo-b", chart: "gate", deps: []string{"web-c"}},
	{name: "slow-e", namespace: "chaos-argo-c", chart: "slow", deps: []string{"gate-d"}},
	{name: "web-f", namespace: "chaos-argo-c", chart: "web", deps: []string{"web-b"}},
}

func argoCDNamespaces() []string {
	return namespacesOf(argoReleases, func(r argoRelease) string { return r.namespace })
}

// argoState is one bundle version: every release with its value v, and the release whose chart
// is the broken version ("" for a good bundle).
type argoState struct {
	version int
	values  map[string]int
	broken  string
}

func argoInitial() argoState {
	st := argoState{values: map[string]int{}}
	for _, r := range argoReleases {
		st.values[r.name] = 1
	}
	return st
}

// next moves a broken release back to its good chart with a new value and changes the values
// of 1-2 releases (values only grow, so no spec comes back); with broken, it changes nothing
// but one release that is not a gate, on its broken chart with a new value.
func (st argoState) next(rnd *rand.Rand, broken bool) (argoState, string) {
	out := argoState{version: st.version + 1, values: maps.Clone(st.values)}
	var changes []string
	bump := func(name string) {
		out.values[name]++
		changes = append(changes, fmt.Sprintf("%s=%d", name, out.values[name]))
	}
	if st.broken != "" {
		bump(st.broken)
	}
	names := make([]string, 0, len(argoReleases))
	for _, r := range argoReleases {
		if r.name != st.broken {
			names = append(names, r.name)
		}
	}
	rnd.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	if !broken {
		for _, name := range names[:1+rnd.IntN(2)] {
			bump(name)
		}
	} else {
		var candidates []string
		for _, r := range argoReleases {
			if !r.gate() {
				candidates = append(candidates, r.name)
			}
		}
		out.broken = candidates[rnd.IntN(len(candidates))]
		bump(out.broken)
		changes = append(changes, out.broken+" on its broken chart")
	}
	sort.Strings(changes)
	return out, strings.Join(changes, ",")
}

// argoExpected is the step each release gets moving from one good state to the next: Install,
// Upgrade for a changed value or chart, Apply for the gate above a changed release.
func argoExpected(from, to argoState) map[string]v1alpha1.StepAction {
	out := map[string]v1alpha1.StepAction{}
	for _, r := range argoReleases {
		f, inFrom := from.values[r.name]
		switch {
		case !inFrom:
			out[r.name] = v1alpha1.ActionInstall
		case f != to.values[r.name] || (from.broken == r.name) != (to.broken == r.name):
			out[r.name] = v1alpha1.ActionUpgrade
		}
	}
	for _, r := range argoReleases {
		if r.gate() && out[r.name] == "" && slices.ContainsFunc(transitiveDeps(r.name, argoReleaseDeps), func(d string) bool { return out[d] != "" }) {
			out[r.name] = v1alpha1.ActionApply
		}
	}
	return out
}

// argoReleaseDeps is the direct dependencies of the variant's release called name.
func argoReleaseDeps(name string) []string {
	if i := slices.IndexFunc(argoReleases, func(r argoRelease) bool { return r.name == name }); i >= 0 {
		return argoReleases[i].deps
	}
	return nil
}

// argoCharts pushes the variant's charts, one per release under its name, and the broken
// versions when a bundle first needs them.
type argoCharts struct {
	s      *stack.Stack
	good   map[string]string // release -> digest
	broken map[string]string
}

func (c *argoCharts) push(ctx context.Context, r argoRelease, broken bool) (string, error) {
	dir := filepath.Join(c.s.Dir, "charts-chaos", r.name)
	if broken {
		dir += "-broken"
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(argoChartsDir, r.chart))); err != nil {
		return "", fmt.Errorf("copy chart %s: %w", r.chart, err)
	}
	meta := filepath.Join(dir, "Chart.yaml")
	raw, err := os.ReadFile(meta)
	if err != nil {
		return "", err
	}
	raw = regexp.MustCompile(`(?m)^name:.*$`).ReplaceAll(raw, []byte("name: "+r.name))
	if broken {
		raw = regexp.MustCompile(`(?m)^version:.*$`).ReplaceAll(raw, []byte("version: "+brokenVersion))
		tpl, err := os.ReadFile(filepath.Join(argoChartsDir, "broken.yaml"))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), tpl, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(meta, raw, 0o644); err != nil {
		return "", err
	}
	if broken {
		ch, err := c.s.Env.PushChart(ctx, dir, stack.RepositoryPath+"/charts")
		if err != nil {
			return "", fmt.Errorf("push the broken chart of %s: %w", r.name, err)
		}
		return ch.Digest, nil
	}
	if err := c.s.AddChart(ctx, stack.ExampleComponent{Name: r.name, Dir: "charts", Namespace: r.namespace}, dir); err != nil {
		return "", err
	}
	return c.s.Digests[r.name], nil
}

// bundle renders st, pushing the broken chart it names if it was not yet.
func (c *argoCharts) bundle(ctx context.Context, st argoState) ([]byte, error) {
	digests := maps.Clone(c.good)
	if st.broken != "" {
		if c.broken[st.broken] == "" {
			i := slices.IndexFunc(argoReleases, func(r argoRelease) bool { return r.name == st.broken })
			d, err := c.push(ctx, argoReleases[i], true)
			if err != nil {
				return nil, err
			}
			c.broken[st.broken] = d
		}
		digests[st.broken] = c.broken[st.broken]
	}
	var cs []stack.ExampleComponent
	for _, r := range argoReleases {
		cs = append(cs, stack.ExampleComponent{Name: r.name, Dir: "charts", Namespace: r.namespace, DependsOn: r.deps,
			ReadinessGate: r.gate(), Values: map[string]any{"v": st.values[r.name]}})
	}
	return stack.BundleYAML("chaos-argocd", bundleVersion(st.version), cs, digests)
}

// Rollouts of a 6-release bundle through real Argo CD v3.4.2 (kwok runs the pods, the charts are
// pulled from a registry) complete while the variant's faults hit (argoCDFaults: the applier,
// the planner and readiness leaders killed and paused, a NATS node killed, Argo CD's
// application controller and repo-server killed and started again). Two releases sync slowly
// (four sync waves), one is a readiness gate (the applier starts its sync), and every third
// bundle puts one release on a chart version Argo CD cannot render. The run fails on:
//   - a good bundle whose rollout does not end Succeeded with every step Succeeded (with exactly
//     the steps its change calls for, when the rollout before succeeded), and the runtime
//     Ready=True/RolledOut at its plan, every Application at its values and good chart;
//   - a broken bundle whose rollout does not end Failed at the broken release's step, with the
//     rollout's message and the runtime's Ready condition naming the release, and the step's
//     message naming the failed NoErrorCondition fence (Argo CD's ComparisonError);
//   - the sync audit (syncaudit_test.go): a step Succeeded before Argo CD reported a sync of
//     the spec it wrote; and every audit of the fake-Argo CD test (the etcd audit, the lease
//     audit, lost commands, parked messages, unexplained exits, the log scan: panics, data races).
func TestRolloutsWithArgoCDUnderFaults(t *testing.T) {
	if !*flagArgoCD {
		t.Skip("the real-Argo CD variant runs with -chaos.argocd (make chaos-argocd)")
	}
	s := stacktest.Need(t)
	ctx := t.Context()
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d: replay the same bundle changes and fault choices (their timing follows the clock) with: make chaos-argocd CHAOS_SEED=%d, or go test -tags %s ./e2e/chaos -run %s -chaos.argocd -chaos.seed=%d",
		seed, seed, buildTag, argoCDTest, seed)
	bundleRand := rand.New(rand.NewPCG(uint64(seed), 1)) //nolint:gosec // G115: a seed, any bit pattern will do
	admin := adminUsername(t, s)

	charts := &argoCharts{s: s, good: map[string]string{}, broken: map[string]string{}}
	for _, r := range argoReleases {
		d, err := charts.push(ctx, r, false)
		if err != nil {
			t.Fatal(err)
		}
		charts.good[r.name] = d
	}

	auditCtx, stopAudit := context.WithCancel(context.Background())
	defer stopAudit()
	auditStart := time.Now()
	audit, err := startAuditor(auditCtx, s.Env.EtcdURL, admin)
	if err != nil {
		t.Fatal(err)
	}
	m := newMonkey(s, seed, nil, t.Logf)
	only := *flagOnly
	if only == "" {
		only = strings.Join(argoCDFaults, ",")
	}
	if unknown := m.only(only); len(unknown) > 0 || len(m.kinds) == 0 {
		t.Fatalf("-chaos.only=%s: no fault kind named %s", only, strings.Join(unknown, ", "))
	}
	stopSupervisor := background(m.supervise)
	defer stopSupervisor()
	stop := background(m.run) // the faults
	defer stop()

	d := &driver{t: t, s: s, versions: map[string]int{}, timeout: argoRolloutTimeout}
	spec := stack.DefaultRuntimeSpec()
	spec.Rollout.Parallelism = 2
	apply := func(st argoState) {
		t.Helper()
		timeout := goodActionTimeout
		if st.broken != "" {
			timeout = brokenActionTimeout
		}
		// The runtime first (the bundle first at the install, so the runtime finds it).
		install := spec.Rollout.ActionTimeout == nil
		if !install && spec.Rollout.ActionTimeout.Duration != timeout {
			spec.Rollout.ActionTimeout = &metav1.Duration{Duration: timeout}
			retry(t, "apply the ClusterRuntime", func(ctx context.Context) error { return s.ApplyRuntime(ctx, spec) })
		}
		b, err := charts.bundle(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		retry(t, "apply bundle "+bundleVersion(st.version), func(ctx context.Context) error { return s.ApplyBundle(ctx, b) })
		if install {
			spec.Rollout.ActionTimeout = &metav1.Duration{Duration: timeout}
			retry(t, "apply the ClusterRuntime", func(ctx context.Context) error { return s.ApplyRuntime(ctx, spec) })
		}
	}
	begin := time.Now()
	st := argoInitial()
	states := map[int]argoState{0: st}
	d.start()
	apply(st)
	good := st // the last good state rolled out
	n := argoCheckSucceeded(t, s, d.waitRolledOut(st.version), &argoState{version: -1}, st)
	t.Logf("rollout 0 (install of %d releases, %d steps) done in %s", len(argoReleases), n, time.Since(begin).Round(time.Millisecond))

	failed := 0
	lastFailed := false
	for i := 1; ; i++ {
		enough := i > *flagRollouts && len(m.below(*flagMinFaults)) == 0 && failed > 0 && !lastFailed
		late := *flagDuration > 0 && time.Since(begin) > *flagDuration && !lastFailed
		if enough || late || t.Failed() {
			break
		}
		broken := i%3 == 2
		var changes string
		st, changes = st.next(bundleRand, broken)
		states[st.version] = st
		if broken {
			start := time.Now()
			apply(st)
			ro := argoWaitFailed(t, s, d, st)
			failed++
			lastFailed = true
			t.Logf("rollout %d (bundle %s: %s) ended in %s: %s; %s so far", i, bundleVersion(st.version), changes,
				time.Since(start).Round(time.Millisecond), ro.Status.Message, m.short())
			continue
		}
		d.start()
		apply(st)
		rt := d.waitRolledOut(st.version)
		from := &good
		if lastFailed {
			from = nil // a release the failed rollout wrote holds its plan: no exact steps
		}
		n := argoCheckSucceeded(t, s, rt, from, st)
		good, lastFailed = st, false
		t.Logf("rollout %d (bundle %s: %s; %d steps) done in %s; %s so far", i, bundleVersion(st.version), changes, n, d.last().Round(time.Millisecond), m.short())
	}
	rollouts := len(d.windows) + failed
	stop()
	t.Logf("%d rollouts (%d of broken bundles) in %s", rollouts, failed, time.Since(begin).Round(time.Second))
	if rollouts <= *flagRollouts {
		t.Errorf("%d rollouts ran, want %d (-chaos.rollouts) within -chaos.duration %s", rollouts-1, *flagRollouts, *flagDuration)
	}
	if failed == 0 {
		t.Errorf("no bundle with a broken chart was rolled out within -chaos.duration %s", *flagDuration)
	}
	if below := m.below(*flagMinFaults); len(below) > 0 {
		t.Errorf("fault kinds injected fewer than %d times (-chaos.min-faults): %s", *flagMinFaults, strings.Join(below, ", "))
	}

	// The stack settles once the faults end: every process up, the last plan rolled out.
	if _, err := s.WaitCondition(ctx, settleTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Errorf("after the faults: %v", err)
	}
	for _, v := range watchesFollow(ctx, s, 2*time.Minute) { // a watch expired (-chaos.only=expire-watches) was followed
		t.Error(v)
	}
	all := argoCheckAllRollouts(t, d, states)
	auditQueues(t, s, all)
	stopSupervisor()
	stopAudit()
	<-audit.done
	// Stalls are reported, not bounded: a repo-server killed during a sync stalls the rollout
	// for Argo CD's retry backoff (goodActionTimeout), which is no fault of the operator's.
	lines, logs, findings := auditRecords(t, s, m, audit, d.windows, 0, auditStart)
	t.Logf("log scan: %d lines of %d processes' logs, %d findings", lines, logs, findings)
}

// argoWaitFailed waits until the rollout to bundle st (with a broken release) ended, and checks
// it failed at the broken release's step, for the ComparisonError, and says so where a person
// looks: the rollout's message and the runtime's Ready condition.
func argoWaitFailed(t *testing.T, s *stack.Stack, d *driver, st argoState) *v1alpha1.RuntimeRollout {
	t.Helper()
	what := fmt.Sprintf("bundle %s (%s on its broken chart)", bundleVersion(st.version), st.broken)
	var ro *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(t.Context(), rolloutTimeout, "the rollout of "+what+" ended", func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil || rt.Status.Rollout == "" {
			return false, err // the apiserver is down: a fault
		}
		if v, err := d.version(ctx, rt.Status.DesiredPlan); err != nil || v != st.version {
			return false, fmt.Errorf("desired plan %q is bundle %d, not %d (%v)", rt.Status.DesiredPlan, v, st.version, err)
		}
		o, err := s.Rollout(ctx, rt.Status.Rollout)
		if err != nil {
			return false, err
		}
		ro = o
		if o.Spec.ToDigest != rt.Status.DesiredPlan || o.Status.Outcome == "" {
			return false, fmt.Errorf("rollout %s: phase %s", o.Name, o.Status.Phase)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (rollout: %s)", what, err, stacktest.DescribeRollout(ro))
	}
	if ro.Status.Phase != v1alpha1.PhaseFailed || ro.Status.Outcome != v1alpha1.OutcomeFailed {
		t.Errorf("rollout %s of %s ended %s (%s), want %s (%s): %s",
			ro.Name, what, ro.Status.Phase, ro.Status.Outcome, v1alpha1.PhaseFailed, v1alpha1.OutcomeFailed, stacktest.DescribeRollout(ro))
		return ro
	}
	step, ok := stacktest.FindStep(ro, st.broken)
	switch {
	case !ok:
		t.Errorf("rollout %s of %s has no step for %s: %s", ro.Name, what, st.broken, stacktest.DescribeRollout(ro))
	case step.State != v1alpha1.StepFailed:
		t.Errorf("rollout %s of %s: the step of %s is %s, want %s: %s", ro.Name, what, st.broken, step.State, v1alpha1.StepFailed, stacktest.DescribeRollout(ro))
	case !strings.Contains(step.Message, v1alpha1.FenceNoErrorCondition+" "+string(v1alpha1.FenceFailed)):
		t.Errorf("rollout %s of %s: the step of %s failed without naming the %s fence Failed (Argo CD's ComparisonError): %s",
			ro.Name, what, st.broken, v1alpha1.FenceNoErrorCondition, step.Message)
	}
	if !strings.Contains(ro.Status.Message, st.broken) {
		t.Errorf("rollout %s of %s: its message does not name %s: %s", ro.Name, what, st.broken, ro.Status.Message)
	}
	// The runtime says so too, once the planner wrote it after the rollout: Ready names the
	// failed rollout and its outcome, Stalled (what needs a person) the release and why.
	var rt *v1alpha1.ClusterRuntime
	err = testenv.WaitFor(t.Context(), writeTimeout, "the runtime's conditions after the failed rollout "+ro.Name, func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		rt = r
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionStalled)
		return c != nil && c.ObservedGeneration == r.Generation && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, ro.Name), nil
	})
	if err != nil {
		t.Errorf("after the failed rollout %s of %s: %v", ro.Name, what, err)
		return ro
	}
	if c := stacktest.Condition(rt, v1alpha1.ConditionReady); c.Status == metav1.ConditionTrue || !strings.Contains(c.Message, ro.Name) || !strings.Contains(c.Message, v1alpha1.OutcomeFailed) {
		t.Errorf("after the failed rollout %s of %s, the runtime's Ready=%s/%s does not say it failed: %s", ro.Name, what, c.Status, c.Reason, c.Message)
	}
	if c := stacktest.Condition(rt, v1alpha1.ConditionStalled); c.Reason != v1alpha1.ReasonRolloutFailed || !strings.Contains(c.Message, st.broken) {
		t.Errorf("after the failed rollout %s of %s, the runtime's Stalled=%s/%s does not name %s: %s", ro.Name, what, c.Status, c.Reason, st.broken, c.Message)
	}
	return ro
}

// argoCheckSucceeded checks the runtime's rollout to good state to: Succeeded with every step
// Succeeded and, when from is the state before (the rollout before succeeded), exactly the
// steps of the move; every Application at to's value, on its good chart, written by its step.
// It returns the number of steps.
func argoCheckSucceeded(t *testing.T, s *stack.Stack, rt *v1alpha1.ClusterRuntime, from *argoState, to argoState) int {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	retry(t, "read rollout "+rt.Status.Rollout, func(ctx context.Context) (err error) {
		ro, err = s.Rollout(ctx, rt.Status.Rollout)
		return err
	})
	got, stepOf := succeededSteps(t, ro)
	if from != nil {
		if want := argoExpected(*from, to); !maps.Equal(got, want) {
			t.Errorf("rollout %s (bundle %s to %s): steps %v, want %v", ro.Name, bundleVersion(from.version), bundleVersion(to.version), got, want)
		}
	}
	for _, r := range argoReleases {
		var app *argoapp.Application
		retry(t, "read application "+r.name, func(ctx context.Context) error {
			u, err := stacktest.Applications(s).Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			app, err = stacktest.DecodeApplication(u)
			return err
		})
		want := s.Digests[r.name]
		if app.Spec.Source == nil || app.Spec.Source.TargetRevision != want {
			t.Errorf("Application %s: source %+v, want the good chart at %s", r.name, app.Spec.Source, want)
			continue
		}
		if v := stacktest.Values(t, app.Spec.Source)["v"]; fmt.Sprint(v) != fmt.Sprint(to.values[r.name]) {
			t.Errorf("Application %s: values v=%v, want %d", r.name, v, to.values[r.name])
		}
		if id, ok := stepOf[r.name]; ok && app.Annotations[v1alpha1.AnnotationStep] != id {
			t.Errorf("Application %s: step %q, want %q", r.name, app.Annotations[v1alpha1.AnnotationStep], id)
		}
	}
	return len(ro.Status.Steps)
}

// argoCheckAllRollouts checks that every rollout of the run ended Succeeded, or Failed for a
// bundle with a broken chart (at that release's step), and returns them.
func argoCheckAllRollouts(t *testing.T, d *driver, states map[int]argoState) []v1alpha1.RuntimeRollout {
	t.Helper()
	var out []v1alpha1.RuntimeRollout
	for _, ro := range listRollouts(t, d.s) {
		out = append(out, ro)
		var v int
		retry(t, "read the plan of rollout "+ro.Name, func(ctx context.Context) (err error) {
			v, err = d.version(ctx, ro.Spec.ToDigest)
			return err
		})
		st := states[v]
		switch {
		case ro.Status.Phase == v1alpha1.PhaseSucceeded && st.broken == "":
		case ro.Status.Phase == v1alpha1.PhaseFailed && st.broken != "":
			if step, ok := stacktest.FindStep(&ro, st.broken); !ok || step.State != v1alpha1.StepFailed {
				t.Errorf("rollout %s of bundle %s failed, but not at the step of %s, on its broken chart: %s", ro.Name, bundleVersion(v), st.broken, stacktest.DescribeRollout(&ro))
			}
		default:
			t.Errorf("rollout %s of bundle %s (broken release %q) ended %s (%s): %s", ro.Name, bundleVersion(v), st.broken, ro.Status.Phase, ro.Status.Outcome, ro.Status.Message)
		}
	}
	return out
}
