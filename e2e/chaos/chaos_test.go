//go:build chaos || e2e

package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. A rollout takes a second or two without faults; the rest is headroom for
// faults landing on it (a paused leader holds it for its lease) on a loaded 2-core machine.
const (
	rolloutTimeout = 4 * time.Minute
	writeTimeout   = 2 * time.Minute
	settleTimeout  = 3 * time.Minute
)

// The bundle changes.
const (
	// supersedeChance is the probability that a second bundle change follows within
	// supersedeWithin, while the first one's rollout is starting or in flight.
	supersedeChance = 0.3
	supersedeWithin = 500 * time.Millisecond
	// toggleChance is the probability that a bundle drops an optional release it has, or brings
	// back one it dropped.
	toggleChance = 0.15
	// approveWithin bounds the random delay before the test approves a rollout's Remove steps.
	approveWithin = 2500 * time.Millisecond
	approveEvery  = 200 * time.Millisecond
)

// release is one component of the chaos bundle.
type release struct {
	name      string
	namespace string
	deps      []string
	gate      bool
	// optional releases come and go: bundles drop them (a Remove step, approved by the test) and
	// bring them back (an Install of a namesake). Nothing depends on them.
	optional bool
}

// releases is a 14-release DAG with two readiness gates, one above the other, and three
// optional leaves.
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
	{name: "leaf-l", namespace: "chaos-leaf", deps: []string{"gate-k", "top-j"}, optional: true},
	{name: "leaf-m", namespace: "chaos-leaf", deps: []string{"base-b"}, optional: true},
	{name: "leaf-n", namespace: "chaos-leaf", deps: []string{"gate-g"}, optional: true},
}

func namespaces() []string {
	return namespacesOf(releases, func(r release) string { return r.namespace })
}

// namespacesOf is the namespaces of releases rs, each once, in their order.
func namespacesOf[R any](rs []R, namespace func(R) string) []string {
	var out []string
	for _, r := range rs {
		if ns := namespace(r); !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// state is one bundle version: the releases it holds, with their values {"v": n}.
type state struct {
	version int
	values  map[string]int
}

// initial holds every release at v=1.
func initial() state {
	st := state{values: map[string]int{}}
	for _, r := range releases {
		st.values[r.name] = 1
	}
	return st
}

// next drops or brings back optional releases and changes the values of 1-3 others. Values
// only grow, so no two versions render the same plan.
func (st state) next(rnd *rand.Rand) (state, string) {
	out := state{version: st.version + 1, values: maps.Clone(st.values)}
	var changes, kept []string
	for _, r := range releases {
		_, present := out.values[r.name]
		toggle := r.optional && rnd.Float64() < toggleChance
		switch {
		case toggle && present:
			delete(out.values, r.name)
			changes = append(changes, "-"+r.name)
		case toggle:
			out.values[r.name] = out.version + 1 // above any value it had before
			changes = append(changes, "+"+r.name)
		case present:
			kept = append(kept, r.name)
		}
	}
	rnd.Shuffle(len(kept), func(a, b int) { kept[a], kept[b] = kept[b], kept[a] })
	for _, name := range kept[:min(len(kept), 1+rnd.IntN(3))] {
		out.values[name]++
		changes = append(changes, fmt.Sprintf("%s=%d", name, out.values[name]))
	}
	sort.Strings(changes)
	return out, strings.Join(changes, ",")
}

// bundle renders the chaos bundle of st.
func bundle(st state) ([]byte, error) {
	var cs []stack.ExampleComponent
	digests := map[string]string{}
	for _, r := range releases {
		v, ok := st.values[r.name]
		if !ok {
			continue
		}
		cs = append(cs, stack.ExampleComponent{Name: r.name, Dir: "charts", Namespace: r.namespace, DependsOn: r.deps,
			ReadinessGate: r.gate, Values: map[string]any{"v": v}})
		digests[r.name] = stack.FakeDigest(r.name)
	}
	return stack.BundleYAML("chaos", bundleVersion(st.version), cs, digests)
}

func bundleVersion(v int) string { return fmt.Sprintf("1.0.%d", v) }

// expectedActions is the step each release gets moving from one state to another: Install,
// Remove, Upgrade for changed values, Apply for a gate above a changed release, none for the rest.
func expectedActions(from, to state) map[string]v1alpha1.StepAction {
	out := map[string]v1alpha1.StepAction{}
	for _, r := range releases {
		f, inFrom := from.values[r.name]
		v, inTo := to.values[r.name]
		switch {
		case inTo && !inFrom:
			out[r.name] = v1alpha1.ActionInstall
		case inFrom && !inTo:
			out[r.name] = v1alpha1.ActionRemove
		case inTo && f != v:
			out[r.name] = v1alpha1.ActionUpgrade
		}
	}
	for _, r := range releases {
		if _, ok := to.values[r.name]; !ok || !r.gate || out[r.name] != "" {
			continue
		}
		if slices.ContainsFunc(transitiveDeps(r.name, releaseDeps), func(d string) bool { return out[d] != "" }) {
			out[r.name] = v1alpha1.ActionApply
		}
	}
	return out
}

// transitiveDeps lists every release reachable from name through deps (a release's direct
// dependencies), in the order first met: of this test's bundle (releaseDeps) or of the Argo CD
// variant's (argoReleaseDeps).
func transitiveDeps(name string, deps func(string) []string) []string {
	var out []string
	var walk func(string)
	walk = func(n string) {
		for _, d := range deps(n) {
			if !slices.Contains(out, d) {
				out = append(out, d)
				walk(d)
			}
		}
	}
	walk(name)
	return out
}

// releaseDeps is the direct dependencies of the release called name.
func releaseDeps(name string) []string {
	if i := slices.IndexFunc(releases, func(r release) bool { return r.name == name }); i >= 0 {
		return releases[i].deps
	}
	return nil
}

// Rollouts of a 14-release bundle complete while the fault model of faults_test.go runs: processes
// SIGKILLed and paused (two replicas or candidates of every binary), etcd, the kube-apiserver,
// NATS nodes and the fake Argo CD controller killed, a NATS node partitioned, two of three NATS
// nodes killed, a stream at its limit, a binary's API requests throttled (429) and delayed, a
// process cut off from the API server, every watch expired (a forced relist), a release's
// Application refused by the API server for a while, two faults at once; one planner candidate's
// clock is 5 s ahead throughout.
// Bundles change values, drop and bring back releases (Remove steps the test approves at random
// moments), and sometimes change again while a rollout starts (supersede). The run fails on:
//   - a rollout that does not end Succeeded with exactly the steps its change calls for, or an
//     Application not holding the last bundle's values (or not gone when the bundle dropped it);
//   - any rollout ending otherwise than Succeeded, or Superseded before it started a step;
//   - the etcd audit (audit_test.go): two specs under one step, an Application going back to a step
//     it left, a deletion no approved Remove step made, a Remove deleting a recreated namesake;
//   - a leader-elected process writing while another held its Lease (kubeaudit_test.go);
//   - a started step without any result once the command queue drained: a lost command;
//   - a message parked on AICR_PARKED, though every fault ended (redelivered until it passes);
//   - a process exit no fault explains, and any panic, data race or dropped message in any log;
//   - fewer than -chaos.min-faults faults of a kind.
func TestRolloutsCompleteUnderFaults(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	if *flagClockSkew != 0 {
		t.Logf("the clock of %s is %s off for the whole run (-chaos.clock-skew)", skewedPlanner, *flagClockSkew)
	}
	t.Logf("seed %d: replay the same bundle changes, approvals and fault choices (their timing follows the clock) with: make chaos CHAOS_SEED=%d, or go test -tags %s ./e2e/chaos -run %s -chaos.seed=%d",
		seed, seed, buildTag, stackTest, seed)
	bundleRand := rand.New(rand.NewPCG(uint64(seed), 1))
	admin := adminUsername(t, s)

	auditCtx, stopAudit := context.WithCancel(context.Background())
	defer stopAudit()
	auditStart := time.Now()
	audit, err := startAuditor(auditCtx, s.Env.EtcdURL, admin)
	if err != nil {
		t.Fatal(err)
	}
	eng := &engineRunner{s: s}
	if err := eng.start(); err != nil {
		t.Fatal(err)
	}
	defer eng.stop()
	m := newMonkey(s, seed, eng, t.Logf)
	if unknown := m.only(*flagOnly); len(unknown) > 0 || len(m.kinds) == 0 {
		t.Fatalf("-chaos.only=%s: no fault kind named %s", *flagOnly, strings.Join(unknown, ", "))
	}
	stopSupervisor := background(m.supervise)
	defer stopSupervisor()
	ap := &approver{s: s, admin: admin, rand: rand.New(rand.NewPCG(uint64(seed), 3)), scheduled: map[string]time.Time{}}
	stopApprover := background(ap.run)
	defer stopApprover()
	stop := background(m.run) // the faults
	defer stop()

	d := &driver{t: t, s: s, states: map[int]state{}, versions: map[string]int{}}
	begin := time.Now()
	st := initial()
	d.states[0] = st
	spec := stack.DefaultRuntimeSpec()
	spec.Rollout.Parallelism = 3
	d.start()
	d.apply(st)
	retry(t, "apply the ClusterRuntime", func(ctx context.Context) error { return s.ApplyRuntime(ctx, spec) })
	rt := d.waitRolledOut(st.version)
	d.check(rt, st)
	t.Logf("rollout 0 (install of %d releases) done in %s", len(releases), time.Since(begin).Round(time.Millisecond))

	for i := 1; ; i++ {
		enough := i > *flagRollouts && len(m.below(*flagMinFaults)) == 0 &&
			len(m.measuredBelow(*flagMinStalls, audit.progressEvents(), d.windows)) == 0
		late := *flagDuration > 0 && time.Since(begin) > *flagDuration
		if enough || late || t.Failed() {
			break
		}
		var changes string
		st, changes = st.next(bundleRand)
		d.states[st.version] = st
		d.start()
		d.apply(st)
		if bundleRand.Float64() < supersedeChance {
			pause(ctx, time.Duration(bundleRand.Int64N(int64(supersedeWithin))))
			var more string
			st, more = st.next(bundleRand)
			d.states[st.version] = st
			d.apply(st)
			changes += " then " + more
		}
		rt = d.waitRolledOut(st.version)
		n := d.check(rt, st)
		t.Logf("rollout %d (bundle %s: %s; %d steps) done in %s; %s so far", i, bundleVersion(st.version), changes, n, d.last().Round(time.Millisecond), m.short())
	}
	rollouts := len(d.windows)
	stop()
	stopApprover()
	t.Logf("%d rollouts in %s", rollouts, time.Since(begin).Round(time.Second))
	if rollouts <= *flagRollouts {
		t.Errorf("%d rollouts ran, want %d (-chaos.rollouts) within -chaos.duration %s", rollouts-1, *flagRollouts, *flagDuration)
	}
	if below := m.below(*flagMinFaults); len(below) > 0 {
		t.Errorf("fault kinds injected fewer than %d times (-chaos.min-faults): %s", *flagMinFaults, strings.Join(below, ", "))
	}
	if below := m.measuredBelow(*flagMinStalls, audit.progressEvents(), d.windows); len(below) > 0 {
		t.Logf("fault kinds with fewer than %d stall measurements (-chaos.min-stalls) when -chaos.duration ended the run: %s", *flagMinStalls, strings.Join(below, ", "))
	}

	// The stack settles once the faults end: every process up, the last plan rolled out.
	if _, err := s.WaitCondition(ctx, settleTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Errorf("after the faults: %v", err)
	}
	// Every cache follows the API server again: a watch the faults expired was followed by a
	// list of its collection and a watch from there (what client-go's reflector does at once),
	// not by watches again from where it was, which a compaction answers 410 Expired for good.
	// (Two minutes: a reflector waits up to a minute between lists after a run of failures:
	// client-go's backoff, 30 s at most, with as much again of jitter.)
	for _, v := range watchesFollow(ctx, s, 2*time.Minute) {
		t.Error(v)
	}
	all := d.checkAllRollouts()
	auditQueues(t, s, all)
	stopSupervisor()
	eng.stop()
	stopAudit()
	<-audit.done
	lines, logs, findings := auditRecords(t, s, m, audit, d.windows, *flagRecovery, auditStart)
	t.Logf("log scan: %d lines of %d processes' logs, %d findings; approvals given: %d; fake Argo CD: %d status writes, %d lists, %d starts",
		lines, logs, findings, ap.count(), eng.writes, eng.relists, eng.starts)
}

// driver applies bundles and checks each rollout.
type driver struct {
	t        *testing.T
	s        *stack.Stack
	states   map[int]state
	versions map[string]int // plan digest -> bundle version
	windows  [][2]time.Time // when each rollout was in flight
	// timeout bounds waitRolledOut (rolloutTimeout when zero).
	timeout time.Duration
}

func (d *driver) start() { d.windows = append(d.windows, [2]time.Time{time.Now()}) }

func (d *driver) last() time.Duration {
	w := d.windows[len(d.windows)-1]
	return w[1].Sub(w[0])
}

// apply writes bundle st, retrying while the apiserver or admission is down.
func (d *driver) apply(st state) {
	d.t.Helper()
	b, err := bundle(st)
	if err != nil {
		d.t.Fatal(err)
	}
	retry(d.t, "apply bundle "+bundleVersion(st.version), func(ctx context.Context) error { return d.s.ApplyBundle(ctx, b) })
}

// version returns the bundle version of a plan, read from its ConfigMap (-1 for no plan).
func (d *driver) version(ctx context.Context, digest string) (int, error) {
	if digest == "" {
		return -1, nil
	}
	if v, ok := d.versions[digest]; ok {
		return v, nil
	}
	cm, err := d.s.Kube.CoreV1().ConfigMaps(stack.OperatorNamespace).Get(ctx, plan.ConfigMapName(digest), metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	p, err := plan.FromConfigMap(cm)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimPrefix(p.Bundle.Version, "1.0."))
	if err != nil {
		return 0, fmt.Errorf("plan %s: bundle version %q: %w", digest, p.Bundle.Version, err)
	}
	d.versions[digest] = v
	return v, nil
}

// waitRolledOut waits for Ready=True/RolledOut at the plan of bundle version want.
func (d *driver) waitRolledOut(want int) *v1alpha1.ClusterRuntime {
	d.t.Helper()
	var last *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(d.t.Context(), cmp.Or(d.timeout, rolloutTimeout), "bundle "+bundleVersion(want)+" rolled out", func(ctx context.Context) (bool, error) {
		rt, err := d.s.Runtime(ctx)
		if err != nil {
			return false, nil // the apiserver is down: a fault
		}
		last = rt
		c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRolledOut || c.ObservedGeneration != rt.Generation ||
			rt.Status.ActivePlan == "" || rt.Status.ActivePlan != rt.Status.DesiredPlan {
			return false, nil
		}
		v, err := d.version(ctx, rt.Status.ActivePlan)
		return err == nil && v == want, nil
	})
	d.windows[len(d.windows)-1][1] = time.Now()
	if err != nil {
		if last != nil {
			d.t.Fatalf("%v (runtime: %s; rollout %s at %s)", err, stack.Blocker(last), last.Status.Rollout, last.Status.Progress)
		}
		d.t.Fatal(err)
	}
	return last
}

// succeededSteps checks that ro Succeeded with every step Succeeded, and returns each release's
// action and step ID.
func succeededSteps(t *testing.T, ro *v1alpha1.RuntimeRollout) (actions map[string]v1alpha1.StepAction, stepOf map[string]string) {
	t.Helper()
	if ro.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("rollout %s: phase %s, want %s", ro.Name, ro.Status.Phase, v1alpha1.PhaseSucceeded)
	}
	actions, stepOf = map[string]v1alpha1.StepAction{}, map[string]string{}
	for _, st := range ro.Status.Steps {
		actions[st.Release] = st.Action
		stepOf[st.Release] = v1alpha1.StepID(ro.Name, st.Index)
		if st.State != v1alpha1.StepSucceeded {
			t.Errorf("rollout %s step %d (%s %s): %s %s: %s", ro.Name, st.Index, st.Action, st.Release, st.State, st.Reason, st.Message)
		}
	}
	return actions, stepOf
}

// check checks that the runtime's rollout succeeded with exactly the steps its move calls for,
// all Succeeded, and that every release of to has its Application with to's values, written by
// its step, and every other release none. It returns the number of steps.
func (d *driver) check(rt *v1alpha1.ClusterRuntime, to state) int {
	t := d.t
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	retry(t, "read rollout "+rt.Status.Rollout, func(ctx context.Context) (err error) {
		ro, err = d.s.Rollout(ctx, rt.Status.Rollout)
		return err
	})
	var fromVersion int
	retry(t, "read the plan of rollout "+ro.Name, func(ctx context.Context) (err error) {
		fromVersion, err = d.version(ctx, ro.Spec.FromDigest)
		return err
	})
	from := state{version: -1}
	if fromVersion >= 0 {
		from = d.states[fromVersion]
	}
	got, stepOf := succeededSteps(t, ro)
	if want := expectedActions(from, to); !maps.Equal(got, want) {
		t.Errorf("rollout %s (bundle %s to %s): steps %v, want %v", ro.Name, bundleVersion(from.version), bundleVersion(to.version), got, want)
	}
	for _, r := range releases {
		var app *unstructured.Unstructured
		retry(t, "read application "+r.name, func(ctx context.Context) (err error) {
			app, err = d.s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, r.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				app, err = nil, nil
			}
			return err
		})
		want, present := to.values[r.name]
		switch {
		case !present && app != nil:
			t.Errorf("Application %s exists (step %s), but bundle %s dropped the release", r.name, app.GetAnnotations()[v1alpha1.AnnotationStep], bundleVersion(to.version))
		case !present:
		case app == nil:
			t.Errorf("Application %s is missing", r.name)
		default:
			v, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "source", "helm", "valuesObject", "v")
			if fmt.Sprint(v) != fmt.Sprint(want) {
				t.Errorf("Application %s: values v=%v, want %d", r.name, v, want)
			}
			if id, ok := stepOf[r.name]; ok && app.GetAnnotations()[v1alpha1.AnnotationStep] != id {
				t.Errorf("Application %s: step %q, want %q", r.name, app.GetAnnotations()[v1alpha1.AnnotationStep], id)
			}
		}
	}
	return len(ro.Status.Steps)
}

// checkAllRollouts checks that every rollout of the run ended Succeeded, or Superseded before
// it started a step, and returns them.
func (d *driver) checkAllRollouts() []v1alpha1.RuntimeRollout {
	out := listRollouts(d.t, d.s)
	for i := range out {
		ro := &out[i]
		switch ro.Status.Phase {
		case v1alpha1.PhaseSucceeded:
		case v1alpha1.PhaseSuperseded:
			for _, st := range ro.Status.Steps {
				if st.StartedAt != nil {
					d.t.Errorf("rollout %s was superseded after its step %d (%s %s) started", ro.Name, st.Index, st.Action, st.Release)
				}
			}
		default:
			d.t.Errorf("rollout %s ended %s (%s): %s", ro.Name, ro.Status.Phase, ro.Status.Outcome, ro.Status.Message)
		}
	}
	return out
}

func retry(t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	if err := testenv.WaitFor(t.Context(), writeTimeout, what, func(ctx context.Context) (bool, error) {
		err := f(ctx)
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// adminUsername is the username the environment's admin kubeconfig authenticates as: the person
// who approves.
func adminUsername(t *testing.T, s *stack.Stack) string {
	t.Helper()
	r, err := s.Kube.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who am I: %v", err)
	}
	return r.Status.UserInfo.Username
}

// approver plays the person: it approves every rollout with Remove steps after a random delay
// (0 to approveWithin from when it first sees it), whatever the rollout is doing then.
type approver struct {
	s     *stack.Stack
	admin string
	rand  *rand.Rand

	mu        sync.Mutex
	scheduled map[string]time.Time
	approved  []string
}

func (a *approver) run(ctx context.Context) {
	for ctx.Err() == nil {
		a.once(ctx)
		pause(ctx, approveEvery)
	}
}

func (a *approver) once(ctx context.Context) {
	list, err := a.s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // the apiserver is down: next time
	}
	for _, u := range list.Items {
		ro, err := a.s.DecodeRollout(ctx, &u)
		if err != nil || ro.Spec.Approval != nil || ro.Status.Outcome != "" {
			continue
		}
		if !slices.ContainsFunc(ro.Status.Steps, func(st v1alpha1.Step) bool { return st.Action == v1alpha1.ActionRemove }) {
			continue
		}
		a.mu.Lock()
		due, ok := a.scheduled[ro.Name]
		if !ok {
			due = time.Now().Add(time.Duration(a.rand.Int64N(int64(approveWithin))))
			a.scheduled[ro.Name] = due
		}
		a.mu.Unlock()
		if time.Now().Before(due) {
			continue
		}
		patch := fmt.Sprintf(`{"spec":{"approval":{"approvedBy":%q,"reason":"chaos: Remove steps approved at a random moment","approvedAt":%q}}}`,
			a.admin, time.Now().UTC().Format(time.RFC3339))
		if _, err := a.s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Patch(ctx, ro.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
			a.mu.Lock()
			a.approved = append(a.approved, ro.Name)
			a.mu.Unlock()
		}
	}
}

func (a *approver) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.approved)
}

// watchesFollow waits up to within for every process to watch again, with a watch the API
// server serves, each collection a watch of was answered 410 Expired (stack.APIProxy.Stale), and
// returns one violation per process that does not: its cache of that collection stopped at the
// compaction.
func watchesFollow(ctx context.Context, s *stack.Stack, within time.Duration) []string {
	var violations []string
	err := testenv.WaitFor(ctx, within, "every cache following the API server", func(context.Context) (bool, error) {
		violations = violations[:0]
		for _, b := range stack.Binaries {
			for _, i := range s.Instances(b) {
				p, err := s.APIProxy(i)
				if err != nil {
					return false, testenv.Permanent(err)
				}
				if c := p.Stale(); len(c) > 0 {
					violations = append(violations, fmt.Sprintf("%s has not watched %s from a current resourceVersion since a watch was answered 410 Expired (waited %s after the run settled): a cache that no longer follows the API server", i, strings.Join(c, ", "), within))
				}
			}
		}
		return len(violations) == 0, nil
	})
	if err != nil && len(violations) == 0 {
		return []string{"watch audit: " + err.Error()}
	}
	return violations
}
