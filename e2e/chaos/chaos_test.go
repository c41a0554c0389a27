//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. A rollout takes a second or two without faults; the rest is headroom for a
// kube-apiserver restart (and the leader elections it costs) on a loaded 2-core machine.
const (
	rolloutTimeout = 4 * time.Minute
	writeTimeout   = 2 * time.Minute
	restartTimeout = 3 * time.Minute
)

// release is one component of the chaos bundle.
type release struct {
	name      string
	namespace string
	deps      []string
	gate      bool
}

// releases is a 12-release DAG with two readiness gates, one above the other.
var releases = []release{
	{name: "base-a", namespace: "chaos-base"},
	{name: "base-b", namespace: "chaos-base"},
	{name: "base-c", namespace: "chaos-base"},
	{name: "mid-d", namespace: "chaos-mid", deps: []string{"base-a"}},
	{name: "mid-e", namespace: "chaos-mid", deps: []string{"base-a", "base-b"}},
	{name: "mid-f", namespace: "chaos-mid", deps: []string{"base-c"}},
	{name: "gate-g", namespace: "chaos-mid", deps: []string{"mid-d", "mid-e"}, gate: true},
	{name: "top-h", namespace: "chaos-top", deps: []string{"gate-g"}},
	{name: "top-i", namespace: "chaos-top", deps: []string{"mid-f", "gate-g"}},
	{name: "top-j", namespace: "chaos-top", deps: []string{"mid-e"}},
	{name: "gate-k", namespace: "chaos-top", deps: []string{"top-h", "top-i"}, gate: true},
	{name: "leaf-l", namespace: "chaos-leaf", deps: []string{"gate-k", "top-j"}},
}

func namespaces() []string {
	var out []string
	for _, r := range releases {
		if !slices.Contains(out, r.namespace) {
			out = append(out, r.namespace)
		}
	}
	return out
}

// bundle renders the chaos bundle with each release's values {"v": n}.
func bundle(version int, values map[string]int) ([]byte, error) {
	cs := make([]stack.ExampleComponent, 0, len(releases))
	digests := map[string]string{}
	for _, r := range releases {
		cs = append(cs, stack.ExampleComponent{Name: r.name, Dir: "charts", Namespace: r.namespace, DependsOn: r.deps,
			ReadinessGate: r.gate, Values: map[string]any{"v": values[r.name]}})
		digests[r.name] = stack.FakeDigest(r.name)
	}
	return stack.BundleYAML("chaos", fmt.Sprintf("1.0.%d", version), cs, digests)
}

// expectedActions is the step each release gets when changed releases are upgraded: Upgrade for
// those, Apply for a gate above one of them, none for the rest.
func expectedActions(changed []string, install bool) map[string]v1alpha1.StepAction {
	out := map[string]v1alpha1.StepAction{}
	for _, r := range releases {
		switch {
		case install:
			out[r.name] = v1alpha1.ActionInstall
		case slices.Contains(changed, r.name):
			out[r.name] = v1alpha1.ActionUpgrade
		case r.gate && slices.ContainsFunc(transitiveDeps(r.name), func(d string) bool { return slices.Contains(changed, d) }):
			out[r.name] = v1alpha1.ActionApply
		}
	}
	return out
}

func transitiveDeps(name string) []string {
	var out []string
	var walk func(string)
	walk = func(n string) {
		for _, r := range releases {
			if r.name != n {
				continue
			}
			for _, d := range r.deps {
				if !slices.Contains(out, d) {
					out = append(out, d)
					walk(d)
				}
			}
		}
	}
	walk(name)
	return out
}

// Rollouts of a 12-release bundle complete while a random binary, the NATS server or the
// kube-apiserver is SIGKILLed and started again at random moments:
//   - every rollout ends Succeeded with every step Succeeded (no command is lost) and exactly
//     the steps the change calls for;
//   - every Application carries the values of the last bundle and the step that wrote them;
//   - no step's Application was written with two different specs, no Application went back to
//     a step it had left, and none was deleted (every write is audited from etcd's watch).
func TestRolloutsCompleteWhileProcessesAreKilled(t *testing.T) {
	s := stacktest.Need(t)
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d: rerun the same bundle changes and fault choices with -chaos.seed=%d (fault timing follows the clock)", seed, seed)
	bundleRand := rand.New(rand.NewPCG(uint64(seed), 1))

	auditCtx, stopAudit := context.WithCancel(context.Background())
	defer stopAudit()
	audit, err := startAuditor(auditCtx, s.Env.EtcdURL)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := newEngine(s)
	if err != nil {
		t.Fatal(err)
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { defer close(engDone); eng.run(engCtx) }()
	defer func() { stopEngine(); <-engDone }()

	monkey := &monkey{s: s, rand: rand.New(rand.NewPCG(uint64(seed), 2)), log: t.Logf, counts: map[string]int{}}
	monkeyCtx, stopMonkey := context.WithCancel(context.Background())
	monkeyDone := make(chan error, 1)
	go func() { monkeyDone <- monkey.run(monkeyCtx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopMonkey()
			if err := <-monkeyDone; err != nil {
				t.Errorf("fault injection: %v", err)
			}
		}
	}
	defer stop()

	ctx := t.Context()
	values := map[string]int{}
	for _, r := range releases {
		values[r.name] = 1
	}
	spec := stack.DefaultRuntimeSpec()
	spec.Rollout.Parallelism = 3
	begin := time.Now()
	apply(t, s, 0, values)
	retry(t, "apply the ClusterRuntime", func(ctx context.Context) error { return s.ApplyRuntime(ctx, spec) })
	rt := waitRolledOut(t, s, "", 0)
	checkRollout(t, s, rt, values, expectedActions(nil, true))
	t.Logf("rollout 0 (install of %d releases) done in %s", len(releases), time.Since(begin).Round(time.Millisecond))

	for i := 1; i <= *flagRollouts; i++ {
		names := make([]string, 0, len(releases))
		for _, r := range releases {
			names = append(names, r.name)
		}
		bundleRand.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
		changed := names[:1+bundleRand.IntN(4)]
		sort.Strings(changed)
		for _, c := range changed {
			values[c]++
		}
		start := time.Now()
		apply(t, s, i, values)
		rt = waitRolledOut(t, s, rt.Status.ActivePlan, i)
		n := checkRollout(t, s, rt, values, expectedActions(changed, false))
		t.Logf("rollout %d (%s: %d steps) done in %s; faults so far: %s", i, strings.Join(changed, ","), n, time.Since(start).Round(time.Millisecond), monkey.summary())
		if t.Failed() {
			break
		}
	}
	stop()
	t.Logf("%d rollouts in %s; faults: %s", *flagRollouts+1, time.Since(begin).Round(time.Second), monkey.summary())
	if _, err := s.WaitCondition(ctx, rolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Errorf("after the faults: %v", err)
	}
	stopEngine()
	<-engDone
	stopAudit()
	<-audit.done
	violations, summary := audit.report()
	t.Logf("audit: %s; fake Argo CD: %d status writes, %d lists", summary, eng.writes, eng.relists)
	for _, v := range violations {
		t.Error(v)
	}
}

// apply writes bundle version i, retrying while the apiserver or admission is down.
func apply(t *testing.T, s *stack.Stack, i int, values map[string]int) {
	t.Helper()
	b, err := bundle(i, values)
	if err != nil {
		t.Fatal(err)
	}
	retry(t, fmt.Sprintf("apply bundle %d", i), func(ctx context.Context) error { return s.ApplyBundle(ctx, b) })
}

func retry(t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	if err := testenv.WaitFor(t.Context(), writeTimeout, what, func(ctx context.Context) (bool, error) {
		err := f(ctx)
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
}

// waitRolledOut waits for Ready=True/RolledOut at a plan other than prev.
func waitRolledOut(t *testing.T, s *stack.Stack, prev string, i int) *v1alpha1.ClusterRuntime {
	t.Helper()
	var last *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(t.Context(), rolloutTimeout, fmt.Sprintf("rollout %d rolled out", i), func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		last = rt
		c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRolledOut && c.ObservedGeneration == rt.Generation &&
			rt.Status.ActivePlan != prev && rt.Status.ActivePlan == rt.Status.DesiredPlan, nil
	})
	if err != nil {
		if last != nil {
			t.Fatalf("%v (runtime: %s; rollout %s at %s)", err, stack.Blocker(last), last.Status.Rollout, last.Status.Progress)
		}
		t.Fatal(err)
	}
	return last
}

// checkRollout checks that the runtime's rollout succeeded with exactly the expected steps, all
// Succeeded, and that every Application holds its release's values, written by its step.
// It returns the number of steps.
func checkRollout(t *testing.T, s *stack.Stack, rt *v1alpha1.ClusterRuntime, values map[string]int, want map[string]v1alpha1.StepAction) int {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	retry(t, "read rollout "+rt.Status.Rollout, func(ctx context.Context) (err error) {
		ro, err = s.Rollout(ctx, rt.Status.Rollout)
		return err
	})
	if ro.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("rollout %s: phase %s, want %s", ro.Name, ro.Status.Phase, v1alpha1.PhaseSucceeded)
	}
	got := map[string]v1alpha1.StepAction{}
	stepOf := map[string]string{}
	for _, st := range ro.Status.Steps {
		got[st.Release] = st.Action
		stepOf[st.Release] = fmt.Sprintf("%s/%d", ro.Name, st.Index)
		if st.State != v1alpha1.StepSucceeded {
			t.Errorf("rollout %s step %d (%s %s): %s %s: %s", ro.Name, st.Index, st.Action, st.Release, st.State, st.Reason, st.Message)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("rollout %s: steps %v, want %v", ro.Name, got, want)
	}
	for _, r := range releases {
		var app *unstructured.Unstructured
		retry(t, "read application "+r.name, func(ctx context.Context) (err error) {
			app, err = s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, r.name, metav1.GetOptions{})
			return err
		})
		v, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "source", "helm", "valuesObject", "v")
		if fmt.Sprint(v) != fmt.Sprint(values[r.name]) {
			t.Errorf("Application %s: values v=%v, want %d", r.name, v, values[r.name])
		}
		if id, ok := stepOf[r.name]; ok && app.GetAnnotations()[v1alpha1.AnnotationStep] != id {
			t.Errorf("Application %s: step %q, want %q", r.name, app.GetAnnotations()[v1alpha1.AnnotationStep], id)
		}
	}
	return len(ro.Status.Steps)
}

// monkey SIGKILLs one process at a time at random moments and starts it again after a random
// pause; between faults it plays the kubelet, restarting a binary that exited by itself (a
// leader that lost its lease while the apiserver was down exits by design).
type monkey struct {
	s    *stack.Stack
	rand *rand.Rand
	log  func(string, ...any)

	mu      sync.Mutex
	counts  map[string]int
	crashes int
}

const apiServer = "kube-apiserver"

var targets = append(slices.Clone(stack.Binaries), stack.NATSServer, apiServer)

func (m *monkey) run(ctx context.Context) error {
	for {
		if err := m.restartCrashed(); err != nil {
			return err
		}
		pause(ctx, time.Duration(100+m.rand.IntN(1400))*time.Millisecond)
		if ctx.Err() != nil {
			return m.restartCrashed()
		}
		target := targets[m.rand.IntN(len(targets))]
		down := time.Duration(m.rand.IntN(1000)) * time.Millisecond
		if err := m.kill(ctx, target); err != nil {
			return err
		}
		m.mu.Lock()
		m.counts[target]++
		m.mu.Unlock()
		pause(context.Background(), down)
		if err := m.start(target); err != nil {
			return err
		}
	}
}

func (m *monkey) kill(ctx context.Context, target string) error {
	switch target {
	case apiServer:
		return m.s.KillAPIServer(ctx)
	case stack.NATSServer:
		return m.s.KillNATS()
	default:
		return m.s.StopBinary(target, true)
	}
}

func (m *monkey) start(target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	defer cancel()
	var err error
	switch target {
	case apiServer:
		err = m.s.StartAPIServer(ctx)
	case stack.NATSServer:
		err = m.s.StartNATS(ctx)
	default:
		err = m.s.StartBinary(ctx, target)
	}
	if err != nil {
		return fmt.Errorf("restart %s: %w", target, err)
	}
	return nil
}

func (m *monkey) restartCrashed() error {
	for _, b := range append(slices.Clone(stack.Binaries), stack.NATSServer) {
		if !m.s.Crashed(b) {
			continue
		}
		m.log("%s exited by itself; starting it again (see its log)", b)
		m.mu.Lock()
		m.crashes++
		m.mu.Unlock()
		_ = m.s.StopBinary(b, true)
		if err := m.start(b); err != nil {
			return err
		}
	}
	return nil
}

func (m *monkey) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := []string{}
	for _, t := range targets {
		parts = append(parts, fmt.Sprintf("%s %d", t, m.counts[t]))
	}
	return fmt.Sprintf("%s; %d exited by themselves", strings.Join(parts, ", "), m.crashes)
}
