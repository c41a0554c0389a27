//go:build benchargocd

package benchargocd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/benchstat"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Targets of issue "the figure users feel": the operator's total within 15 % of the floor, and
// one sync per Application.
const (
	ratioTarget = 1.15
	runTimeout  = 5 * time.Minute
	chainLength = 8
	// parallelism lets the operator run every independent step at once, as the floor does: the
	// comparison is of hand-offs, not of a parallelism limit.
	parallelism = 16
)

var (
	reps     = flag.Int("bench.reps", benchstat.MinReps, "repetitions of each scenario, for the operator and for the floor")
	timeline = flag.Bool("bench.timeline", false, "print each run's timeline to standard error: for every Application, ms from the run's start to its last dependency ready, to it seen, to its sync running and to it ready")
	st       *stack.Stack
	w        *watcher
	report   *benchstat.Report
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	report = benchstat.NewReport("aicr-operator on Argo CD v3.4.2 against the event-driven floor (make bench-argocd)")
	binDir := os.Getenv(stack.EnvBinDir)
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "FAIL: AICR_BIN_DIR must name the folder make build fills (bin/)")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upCtx, upCancel := context.WithTimeout(ctx, stacktest.UpTimeout)
	defer upCancel()
	var err error
	st, err = stack.Up(upCtx, stack.Options{BinDir: binDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the local stack:", err)
		if st != nil {
			_ = st.Down()
		}
		return 1
	}
	if w, err = newWatcher(ctx, st); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		_ = st.Down()
		return 1
	}
	code := m.Run()
	report.Print(os.Stdout)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "bench-argocd: logs of every process are in %s/logs (kept with AICR_KEEP_TESTENV=1)\n", st.Dir)
	}
	if err := st.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the local stack:", err)
		return 1
	}
	return code
}

// scenario is a set of releases rolled out once per run, under fresh names and namespaces (the
// prefix), so that every run installs: each run's components are copies of example charts.
type scenario struct {
	name       string
	components func(prefix string) []stack.ExampleComponent
	from       func(c stack.ExampleComponent, prefix string) string // the example chart a component copies
}

var scenarios = []scenario{
	{
		name: fmt.Sprintf("%d-release chain", chainLength),
		components: func(p string) []stack.ExampleComponent {
			var cs []stack.ExampleComponent
			for i := range chainLength {
				c := stack.ExampleComponent{Name: fmt.Sprintf("%schain-%d", p, i), Dir: "charts", Namespace: p + "chain", Values: map[string]any{"replicas": 1}}
				if i > 0 {
					c.DependsOn = []string{fmt.Sprintf("%schain-%d", p, i-1)}
				}
				cs = append(cs, c)
			}
			return cs
		},
		from: func(stack.ExampleComponent, string) string { return "cert-manager" },
	},
	{
		name: "example DAG (9 releases, a readiness gate)",
		components: func(p string) []stack.ExampleComponent {
			var cs []stack.ExampleComponent
			for _, e := range stack.ExampleComponents() {
				c := e
				c.Name, c.Namespace = p+e.Name, p+e.Namespace
				c.DependsOn = nil
				for _, d := range e.DependsOn {
					c.DependsOn = append(c.DependsOn, p+d)
				}
				if e.ReadinessGate {
					c.Values = map[string]any{"target": p + e.Values["target"].(string)}
				}
				cs = append(cs, c)
			}
			return cs
		},
		from: func(c stack.ExampleComponent, p string) string { return strings.TrimPrefix(c.Name, p) },
	},
}

// measured is one rollout of a scenario's components, by the operator or by the floor loop.
type measured struct {
	total        time.Duration      // operator: bundle change → Ready=True; floor: first create → last ready
	firstSync    time.Duration      // start → the first sync running
	firstVisible time.Duration      // start → the first Application seen
	lastReady    time.Duration      // start → the last Application ready
	edges        []time.Duration    // for each release with dependencies: its last dependency ready → its sync running
	visible      []time.Duration    // the same edges, last dependency ready → the Application seen
	pickup       []time.Duration    // for each release: its Application seen → its sync running (Argo CD's part of an edge)
	cpu          map[string]float64 // CPU seconds of each of cpuGroups during the run
	syncTimes    []time.Duration    // for each release: sync running → ready
	syncsPerApp  float64            // completed syncs (status.history) per Application
	operations   float64            // operations seen started, per Application
}

// BenchmarkArgoCD rolls out each scenario reps times by the operator and reps times by the
// floor loop, alternating which goes first, on the stack's Argo CD, and reports both.
func BenchmarkArgoCD(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		op := &operatorRunner{}
		if err := op.warmUp(ctx); err != nil {
			b.Fatal(err)
		}
		if err := floorWarmUp(ctx); err != nil {
			b.Fatal(err)
		}
		for si, sc := range scenarios {
			var ops, floors []measured
			for rep := range *reps {
				opPrefix, floorPrefix := fmt.Sprintf("o%d%d-", si, rep), fmt.Sprintf("f%d%d-", si, rep)
				opCs, floorCs := sc.components(opPrefix), sc.components(floorPrefix)
				for _, c := range append(slices.Clone(opCs), floorCs...) {
					prefix := opPrefix
					if strings.HasPrefix(c.Name, floorPrefix) {
						prefix = floorPrefix
					}
					if err := addComponent(ctx, c, sc.from(c, prefix)); err != nil {
						b.Fatal(err)
					}
				}
				runOp := func() error {
					m, err := op.rollout(ctx, opCs)
					ops = append(ops, m)
					return err
				}
				runFloor := func() error {
					m, err := floorRollout(ctx, floorCs, floorPrefix)
					floors = append(floors, m)
					return err
				}
				first, second := runOp, runFloor
				if rep%2 == 1 {
					first, second = runFloor, runOp
				}
				if err := first(); err != nil {
					b.Fatal(err)
				}
				if err := second(); err != nil {
					b.Fatal(err)
				}
			}
			reportScenario(b, sc.name, ops, floors)
		}
	}
}

// reportScenario adds a scenario's rows to the report.
func reportScenario(b *testing.B, name string, ops, floors []measured) {
	var s benchstat.Series
	for i := range ops {
		o, f := ops[i], floors[i]
		s.Add("op total", o.total.Seconds())
		s.Add("floor total", f.total.Seconds())
		s.Add("ratio", o.total.Seconds()/f.total.Seconds())
		s.Add("op first", ms(o.firstSync))
		s.Add("op first visible", ms(o.firstVisible))
		s.Add("floor first visible", ms(f.firstVisible))
		s.Add("floor first", ms(f.firstSync))
		s.Add("op end", ms(o.total-o.lastReady))
		s.Add("op edge", ms(median(o.edges)))
		s.Add("floor edge", ms(median(f.edges)))
		s.Add("op edge max", ms(slices.Max(o.edges)))
		s.Add("floor edge max", ms(slices.Max(f.edges)))
		s.Add("op visible", ms(median(o.visible)))
		s.Add("floor visible", ms(median(f.visible)))
		s.Add("op visible max", ms(slices.Max(o.visible)))
		s.Add("floor visible max", ms(slices.Max(f.visible)))
		s.Add("op edges sum", ms(sum(o.edges)))
		s.Add("floor edges sum", ms(sum(f.edges)))
		s.Add("op pickup", ms(median(o.pickup)))
		s.Add("floor pickup", ms(median(f.pickup)))
		for _, g := range cpuGroups {
			s.Add("op cpu "+g, o.cpu[g])
			s.Add("floor cpu "+g, f.cpu[g])
		}
		s.Add("op sync", median(o.syncTimes).Seconds())
		s.Add("floor sync", median(f.syncTimes).Seconds())
		s.Add("op syncs", o.syncsPerApp)
		s.Add("floor syncs", f.syncsPerApp)
		s.Add("op operations", o.operations)
		s.Add("floor operations", f.operations)
	}
	ratio := s.Get("ratio")
	b.ReportMetric(ratio.Median, "ratio")
	report.Add(name+": total, operator (bundle change → ClusterRuntime Ready)", s.Get("op total").Format("%.2f", "s"), "", "")
	report.Add(name+": total, floor (first create → last Application ready)", s.Get("floor total").Format("%.2f", "s"), "", "")
	report.Add(name+": ratio operator / floor (paired runs)", ratio.Format("%.3f", "×"), fmt.Sprintf("≤ %.2f ×", ratioTarget),
		ratio.Verdict(func(m float64) bool { return m <= ratioTarget }))
	report.Info("  per-edge gap, last dependency ready → next sync running: median of a run, operator / floor",
		s.Get("op edge").Format("%.0f", "ms")+" / "+s.Get("floor edge").Format("%.0f", "ms"))
	report.Info("  per-edge gap, slowest edge of a run, operator / floor", s.Get("op edge max").Format("%.0f", "ms")+" / "+s.Get("floor edge max").Format("%.0f", "ms"))
	report.Info("  hand-off, last dependency ready → next Application visible: median of a run, operator / floor",
		s.Get("op visible").Format("%.0f", "ms")+" / "+s.Get("floor visible").Format("%.0f", "ms"))
	report.Info("  hand-off, slowest of a run, operator / floor", s.Get("op visible max").Format("%.0f", "ms")+" / "+s.Get("floor visible max").Format("%.0f", "ms"))
	report.Info("  per-edge gaps summed over the run, operator / floor", s.Get("op edges sum").Format("%.0f", "ms")+" / "+s.Get("floor edges sum").Format("%.0f", "ms"))
	report.Info("  start → first sync running: operator (bundle change) / floor (loop start)", s.Get("op first").Format("%.0f", "ms")+" / "+s.Get("floor first").Format("%.0f", "ms"))
	report.Info("  start → first Application visible: operator (bundle change) / floor (loop start)",
		s.Get("op first visible").Format("%.0f", "ms")+" / "+s.Get("floor first visible").Format("%.0f", "ms"))
	report.Info("  operator: last Application ready → ClusterRuntime Ready", s.Get("op end").Format("%.0f", "ms"))
	report.Info("  Argo CD's pick-up, Application visible → its sync running (median of a run), operator / floor",
		s.Get("op pickup").Format("%.0f", "ms")+" / "+s.Get("floor pickup").Format("%.0f", "ms"))
	for _, who := range []string{"op", "floor"} {
		var parts []string
		for _, g := range cpuGroups {
			parts = append(parts, fmt.Sprintf("%.1f", s.Get(who+" cpu "+g).Median))
		}
		report.Info(fmt.Sprintf("  CPU seconds during a run (median), %s: %s", map[string]string{"op": "operator", "floor": "floor"}[who], strings.Join(cpuGroups, " / ")),
			strings.Join(parts, " / "))
	}
	report.Info("  Argo CD's sync, running → ready (median of a run), operator / floor", s.Get("op sync").Format("%.2f", "s")+" / "+s.Get("floor sync").Format("%.2f", "s"))
	for _, who := range []string{"op", "floor"} {
		label := map[string]string{"op": "operator", "floor": "floor"}[who]
		syncs := s.Get(who + " syncs")
		report.Add(fmt.Sprintf("%s: syncs per Application, %s (status.history; operations started %s)", name, label, s.Get(who+" operations").Format("%.2f", "")),
			syncs.Format("%.2f", ""), "1", syncs.Verdict(func(m float64) bool { return m == 1 }))
	}
}

// --- the operator ---

// operatorRunner drives the operator: one ClusterRuntime whose bundle gains each run's
// components (the earlier ones stay, unchanged, so each rollout installs only the new ones).
type operatorRunner struct {
	components []stack.ExampleComponent
	version    int
}

func (o *operatorRunner) warmUp(ctx context.Context) error {
	c := stack.ExampleComponent{Name: "warm-op", Dir: "charts", Namespace: "warm-op", Values: map[string]any{"replicas": 1}}
	if err := addComponent(ctx, c, "cert-manager"); err != nil {
		return err
	}
	o.components = []stack.ExampleComponent{c}
	bundle, digest, err := o.bundle()
	if err != nil {
		return err
	}
	if err := st.ApplyBundle(ctx, bundle); err != nil {
		return err
	}
	spec := stack.DefaultRuntimeSpec()
	spec.Rollout.Parallelism = parallelism
	if err := st.ApplyRuntime(ctx, spec); err != nil {
		return err
	}
	_, err = waitRuntimeReady(ctx, digest)
	return err
}

func (o *operatorRunner) bundle() ([]byte, string, error) {
	o.version++
	raw, err := stack.BundleYAML("bench-argocd", fmt.Sprintf("1.0.%d", o.version), o.components, st.Digests)
	if err != nil {
		return nil, "", err
	}
	p, err := resolve(raw)
	if err != nil {
		return nil, "", err
	}
	return raw, p.Digest(), nil
}

func (o *operatorRunner) rollout(ctx context.Context, cs []stack.ExampleComponent) (measured, error) {
	o.components = append(o.components, cs...)
	bundle, digest, err := o.bundle()
	if err != nil {
		return measured{}, err
	}
	cpu0 := sampleCPU(st.BinDir())
	start := time.Now()
	if err := st.ApplyBundle(ctx, bundle); err != nil {
		return measured{}, err
	}
	at, err := waitRuntimeReady(ctx, digest)
	if err != nil {
		return measured{}, err
	}
	cpu := sampleCPU(st.BinDir()).since(cpu0)
	names := namesOf(cs)
	if err := w.waitReady(ctx, runTimeout, names); err != nil {
		return measured{}, fmt.Errorf("operator: runtime Ready but %w", err)
	}
	m, err := collect(cs, start, at)
	m.cpu = cpu
	return m, err
}

// waitRuntimeReady watches the ClusterRuntime until Ready=True at the plan digest and returns
// when the watch delivered it.
func waitRuntimeReady(ctx context.Context, digest string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	res := st.Dynamic.Resource(v1alpha1.ClusterRuntimeResource)
	sel := metav1.ListOptions{FieldSelector: "metadata.name=" + v1alpha1.RuntimeName}
	last := "not seen"
	for {
		list, err := res.List(ctx, sel)
		if err != nil {
			return time.Time{}, fmt.Errorf("list clusterruntime: %w (last: %s)", err, last)
		}
		for i := range list.Items {
			ok, why := runtimeReady(&list.Items[i], digest)
			if ok {
				return time.Now(), nil
			}
			last = why
		}
		wsel := sel
		wsel.ResourceVersion = list.GetResourceVersion()
		wt, err := res.Watch(ctx, wsel)
		if err != nil {
			return time.Time{}, fmt.Errorf("watch clusterruntime: %w", err)
		}
		for ev := range wt.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			ready, why := runtimeReady(u, digest)
			if ready {
				wt.Stop()
				return time.Now(), nil
			}
			last = why
		}
		wt.Stop()
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("ClusterRuntime not Ready at %s within %s (last: %s)", digest, runTimeout, last)
		}
	}
}

func runtimeReady(u *unstructured.Unstructured, digest string) (bool, string) {
	var rt v1alpha1.ClusterRuntime
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rt); err != nil {
		return false, err.Error()
	}
	c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return false, "no Ready condition"
	}
	ok := c.Status == metav1.ConditionTrue && c.ObservedGeneration == rt.Generation && rt.Status.ActivePlan == digest
	return ok, fmt.Sprintf("Ready=%s %s: %s (active plan %s)", c.Status, c.Reason, c.Message, rt.Status.ActivePlan)
}

// --- the floor ---

// floorWarmUp creates one Application through the floor loop, unmeasured.
func floorWarmUp(ctx context.Context) error {
	c := stack.ExampleComponent{Name: "warm-floor", Dir: "charts", Namespace: "warm-floor", Values: map[string]any{"replicas": 1}}
	if err := addComponent(ctx, c, "cert-manager"); err != nil {
		return err
	}
	_, err := floorRollout(ctx, []stack.ExampleComponent{c}, "warm-")
	return err
}

// floorRollout is the event-driven floor: it renders the components' Applications as the
// operator would (appspec.Build of the resolved plan), creates those without dependencies, and
// creates each other one the moment the watch shows every Application it depends on ready.
func floorRollout(ctx context.Context, cs []stack.ExampleComponent, run string) (measured, error) {
	raw, err := stack.BundleYAML("floor-"+strings.TrimSuffix(run, "-"), "1.0.0", cs, st.Digests)
	if err != nil {
		return measured{}, err
	}
	p, err := resolve(raw)
	if err != nil {
		return measured{}, err
	}
	settings := appspec.Settings{EngineNamespace: stack.EngineNamespace, Project: stack.Project, Repository: st.Repository}
	apps := map[string]*unstructured.Unstructured{}
	deps := map[string][]string{}
	for i := range p.Releases {
		r := &p.Releases[i]
		built, err := appspec.Build(settings, appspec.Input{Runtime: "floor", RuntimeUID: "floor", PlanDigest: p.Digest(), Release: r})
		if err != nil {
			return measured{}, err
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(FloorApplication(built, strings.TrimSuffix(run, "-")))
		if err != nil {
			return measured{}, err
		}
		apps[r.Name] = &unstructured.Unstructured{Object: obj}
		deps[r.Name] = r.DependsOn
	}
	res := st.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
	var mu sync.Mutex
	created := map[string]bool{}
	errc := make(chan error, len(apps))
	todo := make(chan string, len(apps))
	create := func() {
		for name := range todo {
			if _, err := res.Create(ctx, apps[name], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				errc <- fmt.Errorf("floor: create application %s: %w", name, err)
			}
		}
	}
	// due queues every Application whose dependencies are all ready and that is not created yet.
	due := func() {
		mu.Lock()
		defer mu.Unlock()
		for name, ds := range deps {
			if created[name] {
				continue
			}
			ok := true
			for _, d := range ds {
				if a, seen := w.get(d); !seen || a.ready.IsZero() {
					ok = false
					break
				}
			}
			if ok {
				created[name] = true
				todo <- name
			}
		}
	}
	for range 4 {
		go create()
	}
	defer close(todo)
	w.mu.Lock()
	w.onReady = func(string) { due() }
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.onReady = nil
		w.mu.Unlock()
	}()
	cpu0 := sampleCPU(st.BinDir())
	start := time.Now()
	due()
	done := make(chan error, 1)
	go func() { done <- w.waitReady(ctx, runTimeout, namesOf(cs)) }()
	select {
	case err := <-errc:
		return measured{}, err
	case err := <-done:
		if err != nil {
			return measured{}, fmt.Errorf("floor: %w", err)
		}
	}
	cpu := sampleCPU(st.BinDir()).since(cpu0)
	last := time.Time{}
	for _, n := range namesOf(cs) {
		a, _ := w.get(n)
		if a.ready.After(last) {
			last = a.ready
		}
	}
	m, err := collect(cs, start, last)
	m.cpu = cpu
	return m, err
}

// addComponent is stack.AddComponent (idempotent) retried a few times: setting up a run is not
// measured, and an API server on a loaded shared machine times requests out now and then.
func addComponent(ctx context.Context, c stack.ExampleComponent, from string) error {
	var err error
	for attempt := range 4 {
		if err = st.AddComponent(ctx, c, from); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 2 * time.Second):
		}
	}
	return err
}

// --- collection ---

func resolve(bundleYAML []byte) (*plan.Plan, error) {
	var b plan.Bundle
	if err := yaml.Unmarshal(bundleYAML, &b); err != nil {
		return nil, fmt.Errorf("decode bundle: %w", err)
	}
	return plan.Resolve(&b, plan.Inputs{})
}

func namesOf(cs []stack.ExampleComponent) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// collect turns what the watcher saw of cs into a run's figures; end is when the run ended.
func collect(cs []stack.ExampleComponent, start, end time.Time) (measured, error) {
	m := measured{total: end.Sub(start)}
	var first, last, firstSeen time.Time
	var syncs, ops int
	var tl strings.Builder // -bench.timeline: where a run loses time beside its figures' medians
	fmt.Fprintf(&tl, "timeline (ms from the start; the run ended at %.0f):\n", ms(end.Sub(start)))
	fmt.Fprintf(&tl, "  %-40s %10s %8s %8s %8s\n", "application", "deps ready", "seen", "syncing", "ready")
	for _, c := range cs {
		a, ok := w.get(c.Name)
		if !ok || a.ready.IsZero() || a.syncRunning.IsZero() {
			return m, fmt.Errorf("%s: no sync or ready seen", c.Name)
		}
		if firstSeen.IsZero() || a.created.Before(firstSeen) {
			firstSeen = a.created
		}
		if first.IsZero() || a.syncRunning.Before(first) {
			first = a.syncRunning
		}
		if a.ready.After(last) {
			last = a.ready
		}
		m.syncTimes = append(m.syncTimes, a.ready.Sub(a.syncRunning))
		m.pickup = append(m.pickup, a.syncRunning.Sub(a.created))
		syncs += a.history
		ops += len(a.operations)
		var depReady time.Time
		for _, d := range c.DependsOn {
			da, ok := w.get(d)
			if !ok || da.ready.IsZero() {
				return m, errors.New(d + ": dependency never seen ready")
			}
			if da.ready.After(depReady) {
				depReady = da.ready
			}
		}
		if !depReady.IsZero() {
			m.edges = append(m.edges, a.syncRunning.Sub(depReady))
			m.visible = append(m.visible, a.created.Sub(depReady))
		}
		timelineRow(&tl, c.Name, start, depReady, a)
	}
	m.firstSync, m.lastReady, m.firstVisible = first.Sub(start), last.Sub(start), firstSeen.Sub(start)
	if *timeline {
		fmt.Fprint(os.Stderr, tl.String())
	}
	m.syncsPerApp = float64(syncs) / float64(len(cs))
	m.operations = float64(ops) / float64(len(cs))
	return m, nil
}

// timelineRow is one Application's line of a run's timeline (-bench.timeline): ms from the
// run's start to its last dependency ready, to it seen, to its sync running and to it ready.
func timelineRow(b *strings.Builder, name string, start, depReady time.Time, a seen) {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.0f", ms(t.Sub(start)))
	}
	fmt.Fprintf(b, "  %-40s %10s %8s %8s %8s\n", name, at(depReady), at(a.created), at(a.syncRunning), at(a.ready))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(benchstat.Summarize(xs).Median)
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}
