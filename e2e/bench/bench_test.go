//go:build bench

package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/benchstat"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/plantest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Sizes and timeouts of the scenarios.
const (
	overheadReleases = 30
	chainReleases    = 210 // 209 measured step advances
	planSizes        = "1000,10000"
	planRuns         = 5
	writeCommands    = 1000
	writeReleases    = 100
	readinessPlans   = 100 // plans of readinessApps/readinessPlans releases: a plan ConfigMap holds at most 900 KiB

	rolloutTimeout  = 5 * time.Minute
	writesTimeout   = 3 * time.Minute
	verdictsTimeout = 10 * time.Minute
)

// reps is how many times each figure is measured; each is reported as the median of its runs
// with their min and max, and a verdict only from at least benchstat.MinReps.
var reps = flag.Int("bench.reps", benchstat.MinReps, "repetitions of each figure (at least 3 for a verdict)")

// auditOn turns on the API server's audit log (level Metadata, blocking: each request's event
// is written before it is answered), from which BenchmarkRolloutOverhead30 splits each advance
// at the operator's two writes (benchstat.Advances).
var auditOn = flag.Bool("bench.audit", false, "log every request in the API server's audit log and split the 30-release overhead's advances by it (an audit write per request: run the overhead alone)")

// auditPath is the audit log of the API server when -bench.audit is set, else "".
var auditPath string

// readinessApps is how many Applications BenchmarkReadiness10000 creates for each variant
// (-bench.readiness-apps, read by run).
var readinessApps = 10000

var readinessAppsFlag = flag.Int("bench.readiness-apps", readinessApps, "Applications BenchmarkReadiness10000 creates per variant (fewer: where the API server's watch cache of 10 000 GPU-stack Applications does not fit in memory)")

var readinessOnly = flag.String("bench.readiness", "", "run only BenchmarkReadiness10000's variant whose label starts with this (small, GPU)")

// readinessWatchCache is whether the GPU-stack variant's API server runs its watch cache, as
// production does (and as the shared API server does for the small values). Not by default: with
// its watch cache the API server held 1.3 GB of live heap per 1 000 of these Applications (7.6 GB
// of heap with 3 600 created, 2026-12-07), more than a 24 GiB machine has at 10 000. With
// -bench.readiness-apps=2500 it fits.
var readinessWatchCache = flag.Bool("bench.readiness-watch-cache", false, "run BenchmarkReadiness10000's GPU-stack variant on an API server with its watch cache, as production runs it (about 2.6 GB of the API server's memory per 1 000 Applications: with -bench.readiness-apps=2500 on a 24 GiB machine)")

// readinessRefresh is whether each readiness start is followed by an Argo CD refresh of every
// Application (refreshAll). With GPU-stack values a refresh costs the API server about 100 ms of
// CPU per Application, more than 15 minutes of this machine's two cores.
var readinessRefresh = flag.Bool("bench.readiness-refresh", true, "follow each readiness start of BenchmarkReadiness10000 with an Argo CD refresh of every Application")

// readinessMemLimit is GOMEMLIMIT for BenchmarkReadiness10000's readiness processes only (the API
// servers, etcd and the benchmark run without): what the binary sets itself in a container with a
// memory limit (nine tenths of it), such as 460MiB for the chart's 512Mi.
var readinessMemLimit = flag.String("bench.readiness-gomemlimit", "", "GOMEMLIMIT of the readiness processes BenchmarkReadiness10000 starts (as in a container with a memory limit); empty: none")

var (
	h       *harness
	argo    *fakeArgoCD
	results *report
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binDir := os.Getenv("AICR_BIN_DIR")
	if binDir == "" {
		fmt.Fprintln(os.Stderr, "FAIL: AICR_BIN_DIR must name the folder make build fills (bin/)")
		return 1
	}
	flag.Parse()
	readinessApps = *readinessAppsFlag
	if *compareDir != "" && filepath.Clean(*compareDir) == filepath.Clean(binDir) {
		fmt.Fprintf(os.Stderr, "FAIL: -bench.compare=%s is AICR_BIN_DIR itself: name another build's folder (make bench-compare BASE=<commit> builds one)\n", *compareDir)
		return 1
	}
	opts := testenv.Options{}
	if *auditOn {
		args, path, err := auditArgs()
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			return 1
		}
		opts.APIServerArgs, auditPath = args, path
		defer os.RemoveAll(filepath.Dir(path))
	}
	env, err := testenv.Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	results = &report{benchstat.NewReport("aicr-operator performance (make bench)")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err = newHarness(ctx, env, binDir)
	if err != nil {
		if h != nil {
			h.close(true)
		}
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	code := m.Run()
	results.Print(os.Stdout)
	h.close(code != 0)
	return code
}

// BenchmarkIdleRSS starts each binary from bin/ against the apiserver and NATS, waits until it is
// ready and idle, and reports its resident set (VmRSS); reps times each. The last start of each
// binary keeps running, so the rollouts below find the planner, applier and readiness up.
func BenchmarkIdleRSS(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		for _, bin := range v1alpha1.Binaries() {
			var s benchstat.Series
			for rep := range *reps {
				p, rss := startIdle(ctx, b, bin)
				anon, file := rssParts(p)
				s.Add("rss", mib(rss))
				s.Add("anon", mib(anon))
				s.Add("file", mib(file))
				if rep < *reps-1 {
					if err := h.stop(bin); err != nil {
						b.Fatal(err)
					}
				}
			}
			rss := s.Get("rss")
			b.ReportMetric(rss.Median, bin+"-MiB")
			results.add("Idle RSS, "+bin, fmt.Sprintf("%s; anonymous %s, file-backed code %s", rss.Format("%.1f", "MiB"), s.Get("anon").Format("%.1f", ""), s.Get("file").Format("%.1f", "")),
				"≤ 40 MiB", rss.Verdict(func(m float64) bool { return m <= 40 }))
		}
		// The rollouts below need the planner, applier and readiness; the credentials were
		// reported OK once, which the planner keeps.
		for _, bin := range []string{"credrefresher", "admission"} {
			if err := h.stop(bin); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// compareDir names a folder of another build's planner, applier and readiness (make
// bench-compare BASE=<commit> builds one) for BenchmarkRolloutOverhead30 and
// BenchmarkReadiness10000 to measure beside bin/'s.
var compareDir = flag.String("bench.compare", "", "a folder of another build's planner, applier and readiness binaries: BenchmarkRolloutOverhead30 and BenchmarkReadiness10000 measure them beside bin/'s, alternating, and report the paired ratio")

// BenchmarkRolloutOverhead30 creates the ClusterRuntime for a 30-release bundle while the fake
// Argo CD writes every status at once (an install, not measured), then changes the values of
// every release reps times and reports the wall time from each bundle change to Ready=True at
// the new plan: all of it is the operator's own (planner, applier, readiness, NATS and the API
// server round trips).
//
// With -bench.compare each repetition rolls out once with bin/'s binaries and once with the
// folder's, in alternating order, each after an unmeasured rollout that follows the switch of
// binaries. The machine's speed drifts over minutes (the same requests have cost the API
// server 1.8 times the CPU half an hour apart), so runs of one build against runs of another
// mostly compare two moments; the two rollouts of a repetition share one, and the median of
// their ratios is what the change did.
func BenchmarkRolloutOverhead30(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		startRollouts(ctx, b)
		rev := 0
		rollout := func() {
			b.Helper()
			bundle := overheadBundle(rev)
			rev++
			if err := applyBundle(ctx, bundle); err != nil {
				b.Fatal(err)
			}
			if _, err := waitRolledOut(ctx, digestOf(b, bundle)); err != nil {
				b.Fatal(err)
			}
		}
		if err := applyBundle(ctx, overheadBundle(rev)); err != nil {
			b.Fatal(err)
		}
		if err := createRuntime(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := waitRolledOut(ctx, digestOf(b, overheadBundle(rev))); err != nil {
			b.Fatal(err)
		}
		rev++
		var s, base, ratios benchstat.Series
		var cpuNames []string
		if *compareDir == "" {
			for range *reps {
				cpuNames = measureOverhead(ctx, b, overheadBundle(rev), &s)
				rev++
			}
		} else {
			ours := h.binDir
			for i := range *reps {
				for _, dir := range pairOrder(ours, i) {
					if err := h.useBinaries(ctx, dir); err != nil {
						b.Fatal(err)
					}
					rollout() // not measured: the restarted binaries' first
					into := &s
					if dir != ours {
						into = &base
					}
					cpuNames = measureOverhead(ctx, b, overheadBundle(rev), into)
					rev++
				}
				addPairRatios(&ratios, &s, &base, "operator-ms", "cpu")
			}
			if err := h.useBinaries(ctx, ours); err != nil {
				b.Fatal(err)
			}
		}
		// The benchmarks after this one start from the bundle of revision reps.
		rev = *reps
		rollout()
		d := s.Get("ms")
		b.ReportMetric(d.Median, "ms")
		op := s.Get("operator-ms")
		b.ReportMetric(op.Median, "operator-ms")
		results.add(fmt.Sprintf("Operator overhead, %d-release rollout (every release changed, statuses instant): wall time less the fake Argo CD's", overheadReleases),
			fmt.Sprintf("%s (%.1f ms per release)", op.Format("%.0f", "ms"), op.Median/overheadReleases), "≤ 0.5 s", op.Verdict(func(m float64) bool { return m <= 500 }))
		results.info("  wall time, bundle change to Ready; of it the fake Argo CD's (Application seen → its status write returned, summed)",
			d.Format("%.0f", "ms")+"; "+s.Get("fake-ms").Format("%.0f", "ms"))
		ratio := s.Get("floor-ratio")
		b.ReportMetric(ratio.Median, "floor-ratio")
		var medians []string
		for _, w := range floorWrites {
			medians = append(medians, fmt.Sprintf("%s %s", w.name, s.Get("floor:"+w.key).Format("%.1f", "ms")))
		}
		results.add(fmt.Sprintf("Operator overhead, %d-release rollout: wall time (bundle change to Ready, nothing subtracted) over the write floor (each release's rollout status write, apply and engine status write, one after another, each at the API server's median for that request in the same run)", overheadReleases),
			fmt.Sprintf("%s; wall %s, floor %s", ratio.Format("%.3f", "×"), d.Format("%.0f", "ms"), s.Get("floor-ms").Format("%.0f", "ms")),
			"≤ 1.2 ×", ratio.Verdict(func(m float64) bool { return m <= 1.2 }))
		results.info("  the floor's writes, the API server's median (its request-duration histogram, buckets 5, 25, 50 ms ...); the floor from the histogram's means instead",
			strings.Join(medians, ", ")+"; "+s.Get("floor-mean-ms").Format("%.0f", "ms"))
		var parts []string
		for _, x := range hops {
			parts = append(parts, s.Get(x.name).Format("%.0f", ""))
		}
		results.info("  the 29 advances summed (ms): readiness / planner / applier hops", strings.Join(parts, " / "))
		results.info("  CPU per release (ms), median: "+strings.Join(cpuNames, " / "), s.Medians("%.1f", " / ", cpuKeys(cpuNames)...))
		results.info("  API requests per release, median", requestsLine(&s))
		results.info("  the API server's time per request (ms, median of each run's mean; its request-duration histogram)", requestTimesLine(&s))
		if auditPath != "" {
			results.info("  an advance by the API server's audit log (-bench.audit), ms, median of each run's mean: the fake's status write answered → the planner's rollout write received (readiness, NATS, planner) / that write / → the applier's apply received (NATS, applier) / the apply / → the fake's next write received (the watch, the fake) = in all",
				s.Medians("%.2f", " / ", auditSpans...)+" = "+s.Get("audit-total").Format("%.1f", "")+"; advances found per run "+s.Get("audit-n").Format("%.0f", "")+", the applier's reads in them per run "+s.Get("audit-reads").Format("%.0f", ""))
		}
		if *compareDir == "" {
			continue
		}
		other := compareLabel(*compareDir)
		results.info("  compared with "+other+", each repetition a rollout of each: bin/'s overhead; CPU per release in all",
			op.Format("%.0f", "ms")+"; "+s.Get("cpu").Format("%.1f", "ms"))
		results.info("  "+other+"'s overhead; CPU per release in all",
			base.Get("operator-ms").Format("%.0f", "ms")+"; "+base.Get("cpu").Format("%.1f", "ms"))
		results.info("  "+other+"'s API requests per release, median", requestsLine(&base))
		results.info("  paired ratio, bin/ over "+other+" (the two rollouts of a repetition): overhead; CPU per release in all",
			ratios.Get("operator-ms").Format("%.3f", "×")+"; "+ratios.Get("cpu").Format("%.3f", "×"))
	}
}

// foreignApps is how many Applications of other teams BenchmarkSharedArgoCD puts beside the
// operator's in the Argo CD namespace.
const foreignApps = 5000

// foreignLabel marks the Applications BenchmarkSharedArgoCD creates (and deletes after it): a
// label of the benchmark's own, none of the operator's.
const foreignLabel = "bench.aicr.run/foreign"

// BenchmarkSharedArgoCD measures what an Argo CD shared with other teams costs the operator:
// the rollout binaries' resident set and the 30-release overhead without, then with foreignApps
// Applications of other teams in the Argo CD namespace (GPU-stack-sized values, a synced
// status with 40 resources, none of the operator's labels). Each repetition restarts the
// planner, the applier and readiness, so their caches are filled from a fresh list, waits until
// each is idle (its VmRSS), then rolls out once unmeasured and once measured (measureOverhead).
// The ratios are paired by repetition (with over without); flat is each median ≤ 1.10 ×. The
// binaries list and watch Applications by the operator's label (proven request by request by
// the planner's and readiness's integration tests), so neither their memory nor a step should
// grow with what else Argo CD holds. It starts and ends at overheadBundle(reps), where
// BenchmarkRolloutOverhead30 leaves the runtime and BenchmarkStepAdvance expects it.
func BenchmarkSharedArgoCD(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		startRollouts(ctx, b)
		rev := *reps
		base := overheadBundle(rev)
		if _, err := h.dyn.Resource(v1alpha1.ClusterRuntimeResource).Get(ctx, v1alpha1.RuntimeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			// run alone (-bench SharedArgoCD): no benchmark before it made the runtime
			if err := applyBundle(ctx, base); err != nil {
				b.Fatal(err)
			}
			if err := createRuntime(ctx); err != nil {
				b.Fatal(err)
			}
		} else if err != nil {
			b.Fatal(err)
		}
		if _, err := waitRolledOut(ctx, digestOf(b, base)); err != nil {
			b.Fatal(err)
		}
		rollout := func(into *benchstat.Series) {
			b.Helper()
			rev++
			if into != nil {
				measureOverhead(ctx, b, overheadBundle(rev), into)
				return
			}
			bundle := overheadBundle(rev)
			if err := applyBundle(ctx, bundle); err != nil {
				b.Fatal(err)
			}
			if _, err := waitRolledOut(ctx, digestOf(b, bundle)); err != nil {
				b.Fatal(err)
			}
		}
		var without, with, ratios benchstat.Series
		// each figure of each repetition, in order, to pair the two phases' repetitions
		keptWithout, keptWith := map[string][]float64{}, map[string][]float64{}
		phase := func(into *benchstat.Series, keep map[string][]float64) {
			b.Helper()
			for range *reps {
				for _, bin := range rolloutBinaries {
					if err := h.stop(bin); err != nil {
						b.Fatal(err)
					}
					_, rss := startIdle(ctx, b, bin)
					into.Add(bin+"-rss", mib(rss))
					keep[bin+"-rss"] = append(keep[bin+"-rss"], mib(rss))
				}
				rollout(nil) // the restarted binaries' first
				rollout(into)
				for _, n := range into.Names() {
					if n == "operator-ms" || strings.HasPrefix(n, "cpu") {
						keep[n] = append(keep[n], into.Last(n))
					}
				}
			}
		}
		phase(&without, keptWithout)
		if err := createForeignApps(ctx); err != nil {
			b.Fatal(err)
		}
		phase(&with, keptWith)
		if err := deleteApps(ctx, foreignLabel+"=true", "the foreign applications"); err != nil {
			b.Fatal(err)
		}
		// Back to where BenchmarkStepAdvance expects the runtime (values of revision reps).
		rev = *reps - 1
		rollout(nil)
		for n := range keptWith {
			for i, w := range keptWith[n] {
				ratios.Add(n, w/keptWithout[n][i])
			}
		}
		flat := func(m float64) bool { return m <= 1.10 }
		for _, bin := range rolloutBinaries {
			r := ratios.Get(bin + "-rss")
			b.ReportMetric(r.Median, bin+"-rss-ratio")
			results.add(fmt.Sprintf("Shared Argo CD: %s's RSS, idle after a restart, with %d foreign Applications over without (paired)", bin, foreignApps),
				fmt.Sprintf("%s; without %s, with %s", r.Format("%.3f", "×"), without.Get(bin+"-rss").Format("%.1f", "MiB"), with.Get(bin+"-rss").Format("%.1f", "MiB")),
				"≤ 1.10 ×", r.Verdict(flat))
		}
		op := ratios.Get("operator-ms")
		b.ReportMetric(op.Median, "overhead-ratio")
		results.add(fmt.Sprintf("Shared Argo CD: the %d-release overhead with %d foreign Applications over without (paired)", overheadReleases, foreignApps),
			fmt.Sprintf("%s; without %s, with %s", op.Format("%.3f", "×"), without.Get("operator-ms").Format("%.0f", "ms"), with.Get("operator-ms").Format("%.0f", "ms")),
			"≤ 1.10 ×", op.Verdict(flat))
		results.info("  CPU per release, the rollout binaries, the API server, etcd and the benchmark (its fake Argo CD watches every Application) together, with over without (paired); without; with",
			fmt.Sprintf("%s; %s; %s", ratios.Get("cpu").Format("%.3f", "×"), without.Get("cpu").Format("%.1f", "ms"), with.Get("cpu").Format("%.1f", "ms")))
		var perProc []string
		for _, n := range without.Names() {
			if name, ok := strings.CutPrefix(n, "cpu:"); ok {
				perProc = append(perProc, fmt.Sprintf("%s %.2f × (%.1f → %.1f ms)", name, ratios.Get(n).Median, without.Get(n).Median, with.Get(n).Median))
			}
		}
		results.info("  CPU per release of each process, with over without (paired, median)", strings.Join(perProc, "; "))
	}
}

// createForeignApps creates foreignApps Applications of other teams in the Argo CD namespace:
// GPU-stack-sized values, a synced and healthy status with 40 resources, the benchmark's
// foreignLabel and a team label, nothing of the operator's.
func createForeignApps(ctx context.Context) error {
	apps := h.argo.ArgoprojV1alpha1().Applications(engineNamespace)
	jobs, wait := writers(func(a *argov1alpha1.Application) error {
		if _, err := apps.Create(ctx, a, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create foreign application %s: %w", a.Name, err)
		}
		return nil
	})
	shapes := plantest.GPUStackShapes()
	for i := range foreignApps {
		team := fmt.Sprintf("team-%02d", i%20)
		a := &argov1alpha1.Application{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%05d", i), Namespace: engineNamespace,
				Labels: map[string]string{foreignLabel: "true", "team": team}},
			Spec: argov1alpha1.ApplicationSpec{
				Project:     "default",
				Destination: argov1alpha1.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: team},
				Source: &argov1alpha1.ApplicationSource{RepoURL: "oci://registry.example.com/" + team, Chart: "service", TargetRevision: "1.0.0",
					Helm: &argov1alpha1.ApplicationSourceHelm{Values: string(plantest.GPUStackValues(shapes[i%len(shapes)], i))}},
				SyncPolicy: &argov1alpha1.SyncPolicy{Automated: &argov1alpha1.SyncPolicyAutomated{}},
			},
		}
		syncedStatus(a)
		for j := 2; j < 40; j++ {
			a.Status.Resources = append(a.Status.Resources, argov1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment",
				Namespace: team, Name: fmt.Sprintf("%s-%02d", a.Name, j), Status: argov1alpha1.SyncStatusCodeSynced})
		}
		jobs <- a
	}
	close(jobs)
	return wait()
}

// startIdle starts bin from bin/ and waits until it is idle; it returns the process and its
// VmRSS (KiB) then.
func startIdle(ctx context.Context, b *testing.B, bin string) (*proc, int64) {
	b.Helper()
	p, err := h.start(ctx, bin, bin)
	if err != nil {
		b.Fatal(err)
	}
	rss, err := waitIdle(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	return p, rss
}

// startRollouts starts the rolloutBinaries and the fake Argo CD where they do not run yet: a full
// run has them from BenchmarkIdleRSS, a benchmark run alone (-bench Overhead) starts them here.
func startRollouts(ctx context.Context, b *testing.B) {
	b.Helper()
	for _, bin := range rolloutBinaries {
		if h.procs[bin] == nil {
			if _, err := h.start(ctx, bin, bin); err != nil {
				b.Fatal(err)
			}
		}
	}
	if argo == nil {
		var err error
		if argo, err = runFakeArgoCD(h.ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

// rolloutOf is the rollout that last wrote the Application app: the first part of its step
// annotation (<rollout>/<step>).
func rolloutOf(ctx context.Context, b *testing.B, app string) string {
	b.Helper()
	a, err := h.argo.ArgoprojV1alpha1().Applications(engineNamespace).Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	name, _, _ := strings.Cut(a.Annotations[v1alpha1.AnnotationStep], "/")
	return name
}

// pairOrder is the order of repetition rep's two runs under -bench.compare: bin/'s (ours)
// first in even repetitions, the folder's in odd ones. A fixed order misleads: the first run of
// a pair has cost more, whichever build it was.
func pairOrder(ours string, rep int) []string {
	order := []string{ours, *compareDir}
	if rep%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// addPairRatios adds to ratios, for each name, the last value of s over the last of base: the
// ratio of one repetition's pair.
func addPairRatios(ratios, s, base *benchstat.Series, names ...string) {
	for _, n := range names {
		ratios.Add(n, s.Last(n)/base.Last(n))
	}
}

// compareLabel names a -bench.compare folder: the commit hack/bench-base.sh names it after
// (shortened), else the folder.
func compareLabel(dir string) string {
	base := filepath.Base(dir)
	if len(base) == 40 && strings.Trim(base, "0123456789abcdef") == "" {
		return "commit " + base[:7]
	}
	return dir
}

// measureOverhead changes the runtime's bundle to bundle (every release's values changed) and
// adds to s what the rollout took: the wall time to Ready=True at the new plan ("ms"), the fake
// Argo CD's share ("fake-ms") and the rest ("operator-ms"), each process's CPU and all of it
// ("cpu") per release, the API requests per release, and the hops of the 29 advances summed.
// It returns the names of the processes whose CPU it measured.
func measureOverhead(ctx context.Context, b *testing.B, bundle *plan.Bundle, s *benchstat.Series) []string {
	b.Helper()
	// The request counters first: the API server's /metrics costs it about 50 ms of CPU, which
	// is the benchmark's, not the rollout's.
	reqs := apiRequests(ctx)
	cpu := newCPUMeter()
	start := time.Now()
	if err := applyBundle(ctx, bundle); err != nil {
		b.Fatal(err)
	}
	at, err := waitRolledOut(ctx, digestOf(b, bundle))
	if err != nil {
		b.Fatal(err)
	}
	s.Add("ms", ms(at.Sub(start)))
	used := cpu.used()
	cpuNames := used.addPerStep(s, overheadReleases)
	s.Add("cpu", ticksMs(used.total())/overheadReleases)
	after := apiRequests(ctx)
	addRequestsPerStep(s, reqs, after, overheadReleases)
	addWriteFloor(b, s, reqs, after, overheadReleases)
	rolloutName := rolloutOf(ctx, b, "svc-00")
	fake, err := argo.syncTime(rolloutName, overheadReleases)
	if err != nil {
		b.Fatal(err)
	}
	s.Add("fake-ms", ms(fake))
	s.Add("operator-ms", ms(at.Sub(start)-fake))
	if auditPath != "" {
		addAuditedAdvances(b, s, start, at)
	}
	advs, err := argo.advances(rolloutName, overheadReleases)
	if err != nil {
		b.Fatal(err)
	}
	for _, x := range hops {
		var sum time.Duration
		for _, a := range advs {
			sum += x.f(a)
		}
		s.Add(x.name, ms(sum))
	}
	return cpuNames
}

// floorWrites are the writes each release of a chain waits for one after another, whatever
// the operator does: the rollout's status write that starts its step, the Application's
// apply, and the engine's status write that says it is ready (the fake Argo CD's update).
var floorWrites = []struct{ key, name string }{
	{"PUT runtimerollouts/status", "the rollout's status write"},
	{"APPLY applications", "the Application's apply"},
	{"PUT applications", "the engine's status write"},
}

// addWriteFloor adds to s the chain's write floor ("floor-ms"): for each of releases, the three
// floorWrites, each at the API server's median time for that request between the two
// readings (its request-duration histogram: benchstat.MedianMillis), and the wall time's ratio
// to it ("floor-ratio"); beside them each write's median ("floor:<key>") and the same floor
// from the histogram's means ("floor-mean-ms"). A write the histogram did not time fails the
// run: without it there is no floor.
func addWriteFloor(b *testing.B, s *benchstat.Series, before, after benchstat.APIRequests, releases int) {
	b.Helper()
	var floor, mean float64
	for _, w := range floorWrites {
		med, ok := benchstat.MedianMillis(before, after, w.key)
		avg, _ := benchstat.MeanMillis(before, after, w.key)
		if !ok {
			b.Fatalf("the API server timed no %s (%s) during the rollout: no write floor", w.key, w.name)
		}
		s.Add("floor:"+w.key, med)
		floor += med
		mean += avg
	}
	floor *= float64(releases)
	s.Add("floor-ms", floor)
	s.Add("floor-mean-ms", mean*float64(releases))
	s.Add("floor-ratio", s.Last("ms")/floor)
}

// BenchmarkStepAdvance adds a chain of 210 releases (each depends on the previous) to the
// runtime's bundle, then changes the values of all of them reps-1 times, and measures each
// step advance of each of those rollouts: from the fake Argo CD's ready status write of one
// release to the next release's Application visible in the API server (readiness sees the
// status, publishes the verdict, the planner records the step and publishes the next command,
// the applier writes the Application).
func BenchmarkStepAdvance(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if argo == nil {
			b.Skip("needs BenchmarkRolloutOverhead30's runtime")
		}
		var s benchstat.Series
		var cpuNames []string
		for rep := range *reps {
			bundle := overheadBundle(*reps)
			bundle.Metadata.Version = fmt.Sprintf("2.%d", rep)
			bundle.Components = append(bundle.Components, chainComponents(chainReleases, rep)...)
			reqs := apiRequests(ctx) // before the CPU meter starts, as in measureOverhead
			cpu := newCPUMeter()
			meter, err := newWriteMeter(ctx, plannerWrites...)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := applyBundle(ctx, bundle); err != nil {
				b.Fatal(err)
			}
			if _, err := waitRolledOut(ctx, digestOf(b, bundle)); err != nil {
				b.Fatal(err)
			}
			s.Add("total-s", time.Since(start).Seconds())
			meter.close()
			rolloutWrites := meter.sizes(v1alpha1.RuntimeRolloutResource.Resource)
			startKiB, endKiB := startEnd(rolloutWrites, sizeWindow)
			s.Add("rollout-start-kib", startKiB)
			s.Add("rollout-end-kib", endKiB)
			s.Add("rollout-max-kib", maxKiB(rolloutWrites))
			n, written := meter.total()
			s.Add("planner-kib-per-step", float64(written)/1024/chainReleases)
			s.Add("planner-writes-per-step", float64(n)/chainReleases)
			cpuNames = cpu.used().addPerStep(&s, chainReleases)
			addRequestsPerStep(&s, reqs, apiRequests(ctx), chainReleases)
			advs, err := argo.advances(rolloutOf(ctx, b, chainName(0)), chainReleases)
			if err != nil {
				b.Fatal(err)
			}
			hop := func(f func(advance) time.Duration) []time.Duration {
				var out []time.Duration
				for _, a := range advs {
					out = append(out, f(a))
				}
				slices.Sort(out)
				return out
			}
			lat := hop(func(a advance) time.Duration { return a.total })
			s.Add("p50", ms(pct(lat, 50)))
			s.Add("p90", ms(pct(lat, 90)))
			s.Add("p99", ms(pct(lat, 99)))
			s.Add("max", ms(lat[len(lat)-1]))
			for _, x := range hops {
				d := hop(x.f)
				s.Add(x.name+" p50", ms(pct(d, 50)))
				s.Add(x.name+" p99", ms(pct(d, 99)))
			}
		}
		p99 := s.Get("p99")
		for _, m := range []string{"p50", "p90", "p99", "max"} {
			b.ReportMetric(s.Get(m).Median, m+"-ms")
		}
		results.add(fmt.Sprintf("Step advance (%d steps per rollout): p99", chainReleases-1), p99.Format("%.1f", "ms"), "p99 ≤ 50 ms", p99.Verdict(func(m float64) bool { return m <= 50 }))
		results.info("  p50 / p90 / max", fmt.Sprintf("%s / %s / %s", s.Get("p50").Format("%.1f", ""), s.Get("p90").Format("%.1f", ""), s.Get("max").Format("%.1f", "ms")))
		for _, x := range hops {
			results.info("  hop "+x.name+": p50 / p99", s.Get(x.name+" p50").Format("%.1f", "")+" / "+s.Get(x.name+" p99").Format("%.1f", "ms"))
		}
		results.info(fmt.Sprintf("%d-step chain rollout, bundle change to Ready", chainReleases), s.Get("total-s").Format("%.1f", "s"))
		results.info("  CPU per step (ms), median: "+strings.Join(cpuNames, " / "), s.Medians("%.1f", " / ", cpuKeys(cpuNames)...))
		results.info("  API requests per step, median", requestsLine(&s))
		results.info("  the API server's time per request (ms, median of each run's mean; its request-duration histogram)", requestTimesLine(&s))
		results.info(fmt.Sprintf("  RuntimeRollout size per write, mean of the first / last %d writes of the chain (largest)", sizeWindow),
			s.Get("rollout-start-kib").Format("%.1f", "")+" / "+s.Get("rollout-end-kib").Format("%.1f", "KiB")+" ("+s.Get("rollout-max-kib").Format("%.1f", "KiB")+")")
		results.info("  bytes the planner wrote per step (every object it writes during the chain)",
			s.Get("planner-kib-per-step").Format("%.1f", "KiB")+" in "+s.Get("planner-writes-per-step").Format("%.2f", "writes"))
	}
}

// hops are the parts of a step advance, from copies of the bus messages.
var hops = []struct {
	name string
	f    func(advance) time.Duration
}{
	{"readiness: status written → Ready verdict on NATS", func(a advance) time.Duration { return a.readiness }},
	{"planner: verdict → next command on NATS", func(a advance) time.Duration { return a.planner }},
	{"applier: command → next Application in the API server", func(a advance) time.Duration { return a.applier }},
}

// BenchmarkPlanCompute reports shared/plan's Resolve plus Steps (a first rollout: every release
// installed) for generated stacks, planRuns runs each: the small chart-like values of
// plantest.LayeredBundle at 1 000 and 10 000 releases, and the GPU-stack values of
// plantest.GPUStackBundle (about 13 KiB a release) at 10 000.
func BenchmarkPlanCompute(b *testing.B) {
	for b.Loop() {
		for _, c := range []struct {
			label  string
			n      int
			bundle func(n int) *plan.Bundle
			target float64 // ms; 0: none
		}{
			{"small values", 1000, func(n int) *plan.Bundle { return plantest.LayeredBundle(n, 100) }, 0},
			{"small values", 10000, func(n int) *plan.Bundle { return plantest.LayeredBundle(n, 100) }, 80},
			{"GPU-stack values", 10000, func(n int) *plan.Bundle { return plantest.GPUStackBundle(n, 100) }, 0},
		} {
			bundle := c.bundle(c.n)
			var size int
			for _, comp := range bundle.Components {
				size += len(comp.Values)
			}
			in := plan.Inputs{Placement: &v1alpha1.Placement{System: &v1alpha1.NodePlacement{NodeSelector: map[string]string{"node-role.kubernetes.io/system": "true"}}},
				ForbiddenNamespaces: []string{operatorNamespace, engineNamespace}}
			var s benchstat.Series
			for range max(planRuns, benchstat.MinReps) {
				runtime.GC()
				cpu0 := processCPU()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				start := time.Now()
				p, err := plan.Resolve(bundle, in)
				if err != nil {
					b.Fatal(err)
				}
				if steps := plan.Steps(nil, p, plan.StepOptions{}); len(steps) != c.n {
					b.Fatalf("%d steps for %d releases", len(steps), c.n)
				}
				s.Add("ms", ms(time.Since(start)))
				s.Add("cpu", ms(processCPU()-cpu0))
				runtime.ReadMemStats(&m1)
				s.Add("MB", float64(m1.TotalAlloc-m0.TotalAlloc)/1e6)
			}
			d := s.Get("ms")
			b.ReportMetric(d.Median, fmt.Sprintf("releases=%d-%s-ms", c.n, strings.ReplaceAll(c.label, " ", "-")))
			target, verdict := "", ""
			if c.target > 0 {
				target, verdict = fmt.Sprintf("≤ %.0f ms", c.target), d.Verdict(func(m float64) bool { return m <= c.target })
			}
			results.add(fmt.Sprintf("Plan compute (Resolve + Steps), %d releases, %s (%.1f KiB a release)", c.n, c.label, float64(size)/float64(c.n)/1024),
				fmt.Sprintf("%s; CPU %s, allocated %s", d.Format("%.1f", "ms"), s.Get("cpu").Format("%.1f", "ms"), s.Get("MB").Format("%.0f", "MB")), target, verdict)
		}
	}
}

// BenchmarkApplierWrites publishes changed writes of 100 Applications (each block of 100 to a
// plan of its own) as commands on JetStream and reports Written results per second, reps times with 1
// and with 4 applier replicas (processes sharing the durable consumer, 8 workers each). The
// planner and readiness are stopped, so the applier has the machine. A result other than
// Written fails the figure.
func BenchmarkApplierWrites(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		for _, bin := range []string{"planner", "readiness", "applier"} {
			if err := h.stop(bin); err != nil {
				b.Fatal(err)
			}
		}
		// One plan per block of writeReleases commands: commands for one Application may be carried
		// out out of order across replicas, and each must still change its spec.
		var plans []*plan.Plan
		for k := range writeCommands / writeReleases {
			plans = append(plans, storePlan(b, writesPlan(b, fmt.Sprintf("v%d", k))))
		}
		run := 0 // each run's rollout starts a second after the previous one's, so its writes are not Outdated
		for _, replicas := range []int{1, 4} {
			var names []string
			var pids []int
			for i := range replicas {
				name := fmt.Sprintf("applier-%d-%d", replicas, i)
				p, err := h.start(ctx, name, "applier")
				if err != nil {
					b.Fatal(err)
				}
				names, pids = append(names, name), append(pids, p.pid())
			}
			var s benchstat.Series
			failed := 0
			for rep := range *reps {
				ticks0 := sumTicks(pids)
				reqs := apiRequests(ctx)
				w, err := measureWrites(ctx, fmt.Sprintf("writes-%d-%d", replicas, rep), writesStarted.Add(time.Duration(run)*time.Second), plans)
				run++
				if err != nil {
					b.Fatal(err)
				}
				s.Add("rate", float64(w.written)/w.elapsed.Seconds())
				s.Add("cpu", ticksMs(sumTicks(pids)-ticks0)/float64(writeCommands))
				addRequestsPerStep(&s, reqs, apiRequests(ctx), writeCommands)
				if w.bad > 0 {
					failed += w.bad
					b.Errorf("applier writes, %d replica(s), run %d: %d of %d results were not Written (%s)", replicas, rep+1, w.bad, writeCommands, w.badOutcomes)
				}
			}
			for _, n := range names {
				if err := h.stop(n); err != nil {
					b.Fatal(err)
				}
			}
			rate := s.Get("rate")
			verdict := rate.Verdict(func(m float64) bool { return m >= 300 })
			if failed > 0 {
				verdict = fmt.Sprintf("FAILED: %d writes not Written", failed)
			}
			b.ReportMetric(rate.Median, fmt.Sprintf("replicas=%d-writes/s", replicas))
			results.add(fmt.Sprintf("Applier writes, %d replica(s) × 8 workers (Written results only)", replicas), rate.Format("%.0f", "writes/s"), "≥ 300 writes/s", verdict)
			results.info(fmt.Sprintf("  %d replica(s): applier CPU per write; API requests per write", replicas),
				fmt.Sprintf("%s; %s", s.Get("cpu").Format("%.2f", "ms"), requestsLine(&s)))
		}
	}
}

// BenchmarkReadiness10000 creates 10 000 owned Applications with Argo CD's status (40 resources,
// 3 history entries each), starts a fresh readiness reps times, waits until it has judged every
// one and is idle, and reports its resident set (VmRSS) and peak (VmHWM): first with small
// values, then with GPU-stack values (plantest.GPUStackValues, about 13 KiB a release, which
// Argo CD's status copies into comparedTo, the sync result and each history entry). With
// -bench.compare each repetition starts the folder's readiness too, on the same Applications,
// alternating which of the two goes first, and reports the paired ratios.
func BenchmarkReadiness10000(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		for _, v := range []readinessVariant{
			{label: "small values", runtime: "bench10k", perPlan: 100, values: func(int) json.RawMessage { return nil }, targetMiB: 250},
			{label: "GPU-stack values", runtime: "bench10kv", perPlan: 40, values: func(i int) json.RawMessage {
				shapes := plantest.GPUStackShapes()
				return plantest.GPUStackValues(shapes[i%len(shapes)], i)
			}, ownAPIServer: true, targetMiB: 400},
		} {
			if !strings.HasPrefix(v.label, *readinessOnly) {
				continue
			}
			var s, base, ratios benchstat.Series
			var size float64
			measure := func() error {
				var err error
				if size, err = createReadinessApps(ctx, b, v); err != nil {
					return err
				}
				for rep := range *reps {
					dirs := []string{h.binDir}
					if *compareDir != "" {
						dirs = pairOrder(h.binDir, rep)
					}
					for _, dir := range dirs {
						into, tag := &s, "bin"
						if dir == *compareDir {
							into, tag = &base, "base"
						}
						m, err := judgeAll(ctx, dir, v.runtime, fmt.Sprintf("readiness-%s-%d-%s", v.runtime, rep, tag))
						if err != nil {
							return err
						}
						m.addTo(into)
					}
					if *compareDir != "" {
						addPairRatios(&ratios, &s, &base, "cpu", "judged", "rss")
						if *readinessRefresh {
							addPairRatios(&ratios, &s, &base, "refresh-cpu")
						}
					}
				}
				if v.ownAPIServer {
					return nil // its API server goes with it
				}
				return deleteReadinessApps(ctx, v.runtime)
			}
			var err error
			if v.ownAPIServer {
				err = withOwnAPIServer(ctx, measure)
			} else {
				err = measure()
			}
			if err != nil {
				b.Fatal(err)
			}
			rss := s.Get("rss")
			b.ReportMetric(rss.Median, strings.ReplaceAll(v.label, " ", "-")+"-rss-MiB")
			where := ""
			if v.ownAPIServer && !*readinessWatchCache {
				where = ", an API server without watch cache"
			}
			if *readinessMemLimit != "" {
				where += ", GOMEMLIMIT=" + *readinessMemLimit
			}
			results.add(fmt.Sprintf("Readiness RSS watching %d Applications, %s (%.1f KiB a release%s), idle after judging all", readinessApps, v.label, size/1024, where),
				fmt.Sprintf("%s; anonymous %s, file-backed code %s; peak %s", rss.Format("%.0f", "MiB"), s.Get("anon").Format("%.0f", ""), s.Get("file").Format("%.0f", ""), s.Get("hwm").Format("%.0f", "MiB")),
				fmt.Sprintf("≤ %.0f MiB", v.targetMiB), rss.Verdict(func(m float64) bool { return m <= v.targetMiB }))
			results.info(fmt.Sprintf("  %s: start to %d verdicts published; readiness CPU until idle; the API server's CPU in that time; the API server's RSS then", v.label, readinessApps),
				fmt.Sprintf("%s; %s; %s; %s", s.Get("judged").Format("%.1f", "s"), s.Get("cpu").Format("%.1f", "s"), s.Get("apiserver-cpu").Format("%.1f", "s"), s.Get("apiserver-rss").Format("%.0f", "MiB")))
			if !*readinessRefresh {
				results.info(fmt.Sprintf("  %s: no Argo CD refresh played (-bench.readiness-refresh=false)", v.label), "")
			}
			refresh := s.Get("refresh-cpu")
			if *readinessRefresh {
				b.ReportMetric(refresh.Median, strings.ReplaceAll(v.label, " ", "-")+"-refresh-cpu-ms/app")
				results.info(fmt.Sprintf("  %s: an Argo CD refresh of every Application (status.reconciledAt moved): readiness CPU per Application; "+
					"as a share of a core at Argo CD's default reconciliation (all of them every 180 s); verdicts published again; the API server's CPU per Application (the write and its events)", v.label),
					fmt.Sprintf("%s; %.1f %%; %s; %s", refresh.Format("%.2f", "ms"), refresh.Median*float64(readinessApps)/180/1000*100, s.Get("republished").Format("%.0f", ""),
						s.Get("refresh-apiserver-cpu").Format("%.2f", "ms")))
			}
			if *compareDir == "" {
				continue
			}
			other := compareLabel(*compareDir)
			results.info(fmt.Sprintf("  %s, %s's readiness (each repetition a start and a refresh of each, alternating which goes first): RSS; peak; start to every verdict; CPU in the start; per Application refreshed; verdicts published again", v.label, other),
				fmt.Sprintf("%s; %s; %s; %s; %s; %s", base.Get("rss").Format("%.0f", "MiB"), base.Get("hwm").Format("%.0f", "MiB"), base.Get("judged").Format("%.1f", "s"), base.Get("cpu").Format("%.1f", "s"),
					base.Get("refresh-cpu").Format("%.2f", "ms"), base.Get("republished").Format("%.0f", "")))
			results.info(fmt.Sprintf("  %s, paired ratio, bin/ over %s: RSS; start to every verdict; readiness CPU in the start; per Application refreshed", v.label, other),
				fmt.Sprintf("%s; %s; %s; %s", ratios.Get("rss").Format("%.3f", "×"), ratios.Get("judged").Format("%.3f", "×"), ratios.Get("cpu").Format("%.3f", "×"), ratios.Get("refresh-cpu").Format("%.3f", "×")))
		}
	}
}

// judged is one readiness start on the 10 000 Applications, and the refresh after it.
type judged struct {
	rss, anon, file, hwm int64 // KiB
	judged               time.Duration
	cpuTicks             int64
	// refreshTicks is readiness's CPU from the first status write of the refresh to idle after
	// it has seen every one; republished is how many verdicts it published in that time.
	refreshTicks, republished int64
	// apiserverTicks is the API server's CPU from readiness's start until it is idle after its
	// verdicts (its list and watch, and whatever else the API server did meanwhile);
	// refreshAPIServerTicks is its CPU for the refresh (the writes, and their events to readiness).
	apiserverTicks, refreshAPIServerTicks int64
	// apiserverRSS is the API server's resident set (KiB) once readiness is idle after its
	// verdicts; refreshed is whether the refresh was played (-bench.readiness-refresh).
	apiserverRSS int64
	refreshed    bool
}

// addTo records j in s: memory in MiB, the start's times and CPU in seconds, the refresh's CPU
// in milliseconds per Application.
func (j judged) addTo(s *benchstat.Series) {
	s.Add("rss", mib(j.rss))
	s.Add("anon", mib(j.anon))
	s.Add("file", mib(j.file))
	s.Add("hwm", mib(j.hwm))
	s.Add("judged", j.judged.Seconds())
	s.Add("cpu", ticksMs(j.cpuTicks)/1000)
	s.Add("apiserver-cpu", ticksMs(j.apiserverTicks)/1000)
	s.Add("apiserver-rss", mib(j.apiserverRSS))
	if !j.refreshed {
		return
	}
	s.Add("refresh-cpu", ticksMs(j.refreshTicks)/float64(readinessApps))
	s.Add("refresh-apiserver-cpu", ticksMs(j.refreshAPIServerTicks)/float64(readinessApps))
	s.Add("republished", float64(j.republished))
}

// judgeAll starts a fresh readiness from dir, waits for a verdict on each of the runtime's
// readinessApps Applications and for the process to go idle, reads its memory, then plays an
// Argo CD refresh of every Application (refreshAll) and stops it.
func judgeAll(ctx context.Context, dir, rt, name string) (judged, error) {
	var verdicts sync.Map
	var count, published atomic.Int64
	sub, err := h.nc.Subscribe(bus.Prefix+".evt.release."+rt+".>", func(m *nats.Msg) {
		var v bus.ReleaseVerdict
		if json.Unmarshal(m.Data, &v) == nil {
			published.Add(1)
			if _, dup := verdicts.LoadOrStore(v.Release, true); !dup {
				count.Add(1)
			}
		}
	})
	if err != nil {
		return judged{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	start := time.Now()
	cpu := newCPUMeter()
	var env []string
	if *readinessMemLimit != "" {
		env = append(env, "GOMEMLIMIT="+*readinessMemLimit)
	}
	p, err := h.startFrom(ctx, dir, name, "readiness", env...)
	if err != nil {
		return judged{}, err
	}
	defer func() { _ = h.stop(name) }()
	err = testenv.WaitFor(ctx, verdictsTimeout, fmt.Sprintf("readiness judges %d Applications", readinessApps), func(context.Context) (bool, error) {
		select {
		case <-p.exited:
			return true, nil // reported below
		default:
		}
		return count.Load() >= int64(readinessApps), nil
	})
	select {
	case <-p.exited:
		return judged{}, fmt.Errorf("%s exited after %d verdicts: %s", name, count.Load(), lastLines(p.log, 3))
	default:
	}
	if err != nil {
		return judged{}, fmt.Errorf("%w (%d verdicts)", err, count.Load())
	}
	var j judged
	j.judged = time.Since(start)
	if j.rss, err = waitIdle(ctx, p); err != nil {
		return judged{}, err
	}
	if j.hwm, err = procStatus(p.pid(), "VmHWM"); err != nil {
		return judged{}, err
	}
	j.anon, j.file = rssParts(p)
	j.cpuTicks, _ = cpuTicks(p.pid())
	j.apiserverTicks = cpu.used().of("kube-apiserver")
	for _, ap := range h.env.Processes() {
		if ap.Name == "kube-apiserver" {
			j.apiserverRSS, _ = procStatus(ap.PID, "VmRSS")
		}
	}
	if !*readinessRefresh {
		return j, h.stop(name)
	}
	j.refreshed = true
	before := published.Load()
	if j.refreshTicks, j.refreshAPIServerTicks, err = refreshAll(ctx, rt, p); err != nil {
		return judged{}, err
	}
	j.republished = published.Load() - before
	return j, h.stop(name)
}

// refreshed is the status.reconciledAt the last refreshAll wrote: each writes a later one.
var refreshed time.Time

// refreshAll plays one Argo CD refresh of the runtime's readinessApps Applications against the
// running readiness p: nothing changed, so Argo CD's controller writes only status.reconciledAt
// (a merge patch of the Application, which has no status subresource), which it does for every
// Application once per reconciliation period (timeout.reconciliation, 180 s by default). It
// returns readiness's CPU clock ticks, and the API server's, from the first write until readiness
// has seen every Application move (its watch_lag_seconds histogram counts each) and is idle again.
func refreshAll(ctx context.Context, rt string, p *proc) (readiness, apiserver int64, err error) {
	lagCount := func() (float64, error) {
		m, err := stack.ScrapeURL(ctx, p.name, p.metricsURL)
		if err != nil {
			return 0, err
		}
		n, ok := m.Sum("aicr_readiness_watch_lag_seconds_count", nil)
		if !ok {
			return 0, fmt.Errorf("%s exports no aicr_readiness_watch_lag_seconds", p.name)
		}
		return n, nil
	}
	seen, err := lagCount()
	if err != nil {
		return 0, 0, err
	}
	refreshed = refreshed.Add(time.Second)
	if now := time.Now().UTC().Truncate(time.Second); now.After(refreshed) {
		refreshed = now
	}
	patch := []byte(fmt.Sprintf(`{"status":{"reconciledAt":%q}}`, refreshed.Format(time.RFC3339)))
	start, _ := cpuTicks(p.pid())
	cpu := newCPUMeter()
	apps := h.argo.ArgoprojV1alpha1().Applications(engineNamespace)
	names, wait := writers(func(n string) error {
		_, err := apps.Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("refresh application %s: %w", n, err)
		}
		return nil
	})
	// Argo CD's controller refreshes in its queue's order, which knows nothing of plans: a
	// fixed shuffle, not the plans' order in which the Applications were created.
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(readinessApps) {
		names <- fmt.Sprintf("%s-%05d", rt, i)
	}
	close(names)
	if err := wait(); err != nil {
		return 0, 0, err
	}
	want := seen + float64(readinessApps)
	err = testenv.WaitFor(ctx, verdictsTimeout, fmt.Sprintf("%s sees %d refreshed Applications", p.name, readinessApps), func(context.Context) (bool, error) {
		n, err := lagCount()
		return n >= want, err
	})
	if err != nil {
		return 0, 0, err
	}
	if _, err := waitIdle(ctx, p); err != nil {
		return 0, 0, err
	}
	end, _ := cpuTicks(p.pid())
	return end - start, cpu.used().of("kube-apiserver"), nil
}

// --- scenario helpers ---

func chainName(i int) string { return fmt.Sprintf("chain-%03d", i) }

// component is a release with small values; rev changes them, so a new rev upgrades it.
func component(name string, rev int, deps ...string) plan.Component {
	return plan.Component{Name: name, Namespace: "stack", Chart: plan.ChartRef{Path: "charts/" + name, Digest: chartDigest},
		DependsOn: deps, Values: json.RawMessage(fmt.Sprintf(`{"message":%q,"replicas":1,"image":{"tag":"v1.0.%d"}}`, name, rev))}
}

// overheadBundle is a GPU-stack-shaped DAG of 30 releases: each depends on up to two earlier
// ones; rev is in every release's values.
func overheadBundle(rev int) *plan.Bundle {
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "bench", Version: fmt.Sprintf("1.%d", rev)}}
	for i := range overheadReleases {
		var deps []string
		if i > 0 {
			deps = append(deps, fmt.Sprintf("svc-%02d", (i-1)/2))
			if i > 2 && (i-1)/2 != i-2 {
				deps = append(deps, fmt.Sprintf("svc-%02d", i-2))
			}
		}
		b.Components = append(b.Components, component(fmt.Sprintf("svc-%02d", i), rev, deps...))
	}
	return b
}

func chainComponents(n, rev int) []plan.Component {
	var cs []plan.Component
	for i := range n {
		if i == 0 {
			cs = append(cs, component(chainName(i), rev))
			continue
		}
		cs = append(cs, component(chainName(i), rev, chainName(i-1)))
	}
	return cs
}

func digestOf(tb testing.TB, b *plan.Bundle) string {
	tb.Helper()
	if err := b.Validate(); err != nil {
		tb.Fatalf("bundle: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		tb.Fatalf("resolve bundle: %v", err)
	}
	return p.Digest()
}

func applyBundle(ctx context.Context, b *plan.Bundle) error {
	doc, err := yaml.Marshal(b)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bundleConfigMap, Namespace: operatorNamespace},
		Data: map[string]string{"bundle.yaml": string(doc)}}
	cms := h.kube.CoreV1().ConfigMaps(operatorNamespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create bundle configmap: %w", err)
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update bundle configmap: %w", err)
		}
	}
	return nil
}

// writesPlan is writeReleases releases whose values differ between variants.
func writesPlan(tb testing.TB, variant string) *plan.Plan {
	tb.Helper()
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "writes", Version: variant}}
	for i := range writeReleases {
		c := component(fmt.Sprintf("w-%03d", i), 0)
		c.Values = json.RawMessage(fmt.Sprintf(`{"variant":%q,"replicas":%d}`, variant, i))
		b.Components = append(b.Components, c)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func storePlan(tb testing.TB, p *plan.Plan) *plan.Plan {
	tb.Helper()
	cm, err := p.ConfigMap(operatorNamespace)
	if err != nil {
		tb.Fatal(err)
	}
	err = retryTransient(func() error {
		_, err := h.kube.CoreV1().ConfigMaps(operatorNamespace).Create(context.Background(), cm, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		tb.Fatalf("store plan %s: %v", p.Digest(), err)
	}
	return p
}

// retryTransient runs a write until it succeeds (a create: or finds the object there),
// retrying what a loaded API server answers transiently (timeouts, throttling, a lost
// connection). Setting up a figure is not part of it, and a busy shared machine must not fail
// the run.
func retryTransient(write func() error) error {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
	err := retry.OnError(backoff, func(err error) bool {
		return !apierrors.IsAlreadyExists(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) && !apierrors.IsForbidden(err)
	}, write)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// writes is one run of measureWrites.
type writes struct {
	written, bad int
	badOutcomes  string // outcome -> count of the results that were not Written
	elapsed      time.Duration
}

// writesStarted is when the first writes rollout started; each later one starts a second after
// the one before, as rollouts of a runtime do (the applier refuses, as Outdated, a command of a
// rollout that started before the one that last wrote the Application).
var writesStarted = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// measureWrites publishes writeCommands apply commands of runtime "bench", of a rollout started
// at started, and waits for a result of each; elapsed runs from the first publish to the last
// result.
func measureWrites(ctx context.Context, rolloutName string, started time.Time, plans []*plan.Plan) (writes, error) {
	var got atomic.Int64
	var mu sync.Mutex
	outcomes := map[string]int{}
	done := make(chan struct{})
	seen := sync.Map{}
	sub, err := h.nc.Subscribe("aicr.v1.evt.applied.bench.>", func(m *nats.Msg) {
		var r bus.ApplyResult
		if json.Unmarshal(m.Data, &r) != nil || !strings.HasPrefix(r.ID, rolloutName+"/") {
			return
		}
		if _, dup := seen.LoadOrStore(r.ID, true); dup {
			return
		}
		mu.Lock()
		outcomes[string(r.Outcome)]++
		mu.Unlock()
		if got.Add(1) == writeCommands {
			close(done)
		}
	})
	if err != nil {
		return writes{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	pub := bus.NewPublisher(h.js, "bench")
	start := time.Now()
	for i := range writeCommands {
		p := plans[(i/writeReleases)%len(plans)]
		release := fmt.Sprintf("w-%03d", i%writeReleases)
		step := bus.StepRef{Rollout: rolloutName, Index: int32(i + 1), ID: v1alpha1.StepID(rolloutName, int32(i+1)), Started: started}
		cmd := bus.NewApplyCommand("bench", "bench-uid", step, release, v1alpha1.ActionUpgrade, p.Digest(), false, nil)
		cmd.ID = step.ID + "/1"
		if err := pub.Publish(ctx, bus.ApplySubject("bench", release), cmd.ID, cmd); err != nil {
			return writes{}, err
		}
	}
	select {
	case <-done:
	case <-time.After(writesTimeout):
		return writes{}, fmt.Errorf("%d of %d apply results within %s", got.Load(), writeCommands, writesTimeout)
	}
	w := writes{elapsed: time.Since(start)}
	mu.Lock()
	defer mu.Unlock()
	var bad []string
	for o, n := range outcomes {
		if o == string(bus.OutcomeWritten) {
			w.written = n
			continue
		}
		w.bad += n
		bad = append(bad, fmt.Sprintf("%s %d", cmp.Or(o, "no outcome"), n))
	}
	slices.Sort(bad)
	w.badOutcomes = strings.Join(bad, ", ")
	return w, nil
}

// readinessVariant is one set of readinessApps Applications: their runtime label, how many
// releases a plan holds (a plan ConfigMap holds at most 900 KiB) and release i's values (nil:
// the small values of component).
type readinessVariant struct {
	label   string
	runtime string
	perPlan int
	values  func(i int) json.RawMessage
	// targetMiB is the target of readiness's RSS once it judged every one.
	targetMiB float64
	// ownAPIServer runs the variant on an API server and etcd of its own (see
	// withOwnAPIServer).
	ownAPIServer bool
}

// withOwnAPIServer runs f with h pointing at a harness of its own: a new etcd and
// kube-apiserver, and its own embedded NATS. With GPU-stack values an Application as Argo CD
// stores it is about 80 KiB (the values in the spec, comparedTo, the sync result and three
// history entries); the watch cache keeps every one decoded, 1.3 GB of live heap per 1 000, so
// by default (-bench.readiness-watch-cache=false) the API server runs with --watch-cache=false
// (the run's table gives its resident set): readiness's informer then lists in pages from etcd
// instead of the streaming list, so its peak (VmHWM) is the paged list's, and serving those
// lists of 800 MB saturates that etcd (once it timed out readiness's lease renewal and
// readiness, as it must, stopped). There readiness runs without leader election; what is
// measured is its informer.
func withOwnAPIServer(ctx context.Context, f func() error) error {
	// 10 000 Applications with GPU-stack values are about 1 GB in etcd, and a refresh writes each
	// again: with the revisions the API server has not compacted yet (every 5 minutes) that
	// passed etcd's default backend quota of 2 GiB ("mvcc: database space exceeded"). 8 GiB is
	// etcd's suggested maximum.
	var args []string
	if !*readinessWatchCache {
		args = append(args, "--watch-cache=false")
	}
	env, err := testenv.Start(testenv.Options{APIServerArgs: args,
		EtcdArgs: []string{"--quota-backend-bytes=8589934592"}})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	own, err := newHarness(ctx, env, h.binDir)
	if err != nil {
		if own != nil {
			own.close(true)
		}
		return err
	}
	own.noLeaderElection = true
	saved := h
	h = own
	defer func() { h = saved }()
	err = f()
	own.close(err != nil)
	return err
}

// createReadinessApps stores the variant's plans and creates readinessApps Applications as the
// applier writes them, with the status Argo CD records after a sync (40 resources, 3 history
// entries), labelled for the variant's runtime. It returns the mean size of a release's values
// in bytes.
func createReadinessApps(ctx context.Context, tb testing.TB, v readinessVariant) (float64, error) {
	apps := h.argo.ArgoprojV1alpha1().Applications(engineNamespace)
	settings := appspec.Settings{EngineNamespace: engineNamespace, Project: project, Repository: repository}
	started := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	jobs, wait := writers(func(a *argov1alpha1.Application) error {
		if _, err := apps.Create(ctx, a, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create application %s: %w", a.Name, err)
		}
		return nil
	})
	var buildErr error
	var size int
	for k := 0; k*v.perPlan < readinessApps && buildErr == nil; k++ {
		b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "readiness-" + v.runtime, Version: fmt.Sprint(k)}}
		for i := k * v.perPlan; i < min((k+1)*v.perPlan, readinessApps); i++ {
			c := component(fmt.Sprintf("%s-%05d", v.runtime, i), 0)
			if vals := v.values(i); vals != nil {
				c.Values = vals
			}
			size += len(c.Values)
			c.Namespace = "gpu-operator"
			b.Components = append(b.Components, c)
		}
		p, err := plan.Resolve(b, plan.Inputs{})
		if err != nil {
			buildErr = err
			break
		}
		storePlan(tb, p)
		for i := range p.Releases {
			r := &p.Releases[i]
			built, err := appspec.Build(settings, appspec.Input{Runtime: v.runtime, RuntimeUID: v.runtime + "-uid", PlanDigest: p.Digest(), Release: r,
				StepID: fmt.Sprintf("r-%s/%d", v.runtime, k*v.perPlan+i+1), StepStarted: started})
			if err != nil {
				buildErr = err
				break
			}
			// The benchmark plays Argo CD, with Argo CD's types.
			a, err := upstreamApplication(built)
			if err != nil {
				buildErr = err
				break
			}
			a.Annotations[v1alpha1.AnnotationStepWrite] = v1alpha1.StepWriteChanged
			a.Annotations[v1alpha1.AnnotationRefreshFor] = v1alpha1.AnnotatedStepToken(a.Annotations) // its refresh answered
			syncedStatus(a)
			for j := 2; j < 40; j++ { // a release with 40 resources
				res := argov1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: r.Namespace, Name: fmt.Sprintf("%s-component-%02d", r.Name, j), Status: argov1alpha1.SyncStatusCodeSynced}
				a.Status.Resources = append(a.Status.Resources, res)
				a.Status.OperationState.SyncResult.Resources = append(a.Status.OperationState.SyncResult.Resources, &argov1alpha1.ResourceResult{
					Group: res.Group, Version: res.Version, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name, Message: "deployment.apps/" + res.Name + " serverside-applied"})
			}
			for len(a.Status.History) < 3 {
				hist := a.Status.History[0]
				hist.ID = int64(len(a.Status.History))
				a.Status.History = append(a.Status.History, hist)
			}
			jobs <- a
		}
	}
	close(jobs)
	err := wait()
	if buildErr != nil {
		return 0, buildErr
	}
	return float64(size) / float64(readinessApps), err
}

// writers starts 8 goroutines that run write on each item sent to the returned channel, each
// through retryTransient. Close the channel, then call wait: it returns when every item is
// written, or with the first error. After an error the items still sent are taken and not
// written: the run fails anyway, and retrying each one holds it for hours (a refresh whose
// writes etcd refused for lack of space was still retrying them, about a minute each, 12
// minutes later).
func writers[T any](write func(T) error) (chan<- T, func() error) {
	items := make(chan T, 16)
	errc := make(chan error, 1)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				if failed.Load() {
					continue
				}
				if err := retryTransient(func() error { return write(it) }); err != nil {
					failed.Store(true)
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	return items, func() error {
		wg.Wait()
		close(errc)
		return <-errc
	}
}

// deleteReadinessApps deletes the runtime's Applications and waits until they are gone, so the
// next variant's readiness watches only its own.
func deleteReadinessApps(ctx context.Context, rt string) error {
	return deleteApps(ctx, v1alpha1.LabelRuntime+"="+rt, "the applications of runtime "+rt)
}

// deleteApps deletes the Applications that selector selects (what names them, for messages).
func deleteApps(ctx context.Context, selector, what string) error {
	apps := h.argo.ArgoprojV1alpha1().Applications(engineNamespace)
	sel := metav1.ListOptions{LabelSelector: selector}
	// The API server answers a collection of 10 000 with a timeout after its request deadline
	// and stops deleting there (a run left 1 347 behind and waited out the timeout): each
	// round deletes what is left, until a list finds none.
	return testenv.WaitFor(ctx, verdictsTimeout, what+" deleted", func(ctx context.Context) (bool, error) {
		if err := apps.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
			return false, fmt.Errorf("delete %s: %w", what, err)
		}
		l, err := apps.List(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
}

// --- results ---

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct returns the nearest-rank percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

// cpuMeter reads the CPU time of the operator's processes, the API server and etcd, and this
// process (the fake Argo CD and the embedded NATS server): what a step costs regardless of the
// machine's load.
type cpuMeter struct {
	names []string
	pids  []int
	start []int64
}

func newCPUMeter() *cpuMeter {
	m := &cpuMeter{}
	for _, n := range []string{"planner", "applier", "readiness"} {
		if p := h.procs[n]; p != nil {
			m.names, m.pids = append(m.names, n), append(m.pids, p.pid())
		}
	}
	for _, p := range h.env.Processes() {
		if p.Name == "kube-apiserver" || p.Name == "etcd" {
			m.names, m.pids = append(m.names, p.Name), append(m.pids, p.PID)
		}
	}
	m.names, m.pids = append(m.names, "bench (fake Argo CD, NATS)"), append(m.pids, os.Getpid())
	for _, pid := range m.pids {
		t, _ := cpuTicks(pid)
		m.start = append(m.start, t)
	}
	return m
}

type cpuUse struct {
	names []string
	ticks []int64
}

func (m *cpuMeter) used() cpuUse {
	u := cpuUse{names: m.names}
	for i, pid := range m.pids {
		t, _ := cpuTicks(pid)
		u.ticks = append(u.ticks, t-m.start[i])
	}
	return u
}

// of is the clock ticks of the process named name (0: not measured).
func (u cpuUse) of(name string) int64 {
	if i := slices.Index(u.names, name); i >= 0 {
		return u.ticks[i]
	}
	return 0
}

// total is the clock ticks of every process together.
func (u cpuUse) total() int64 {
	var n int64
	for _, t := range u.ticks {
		n += t
	}
	return n
}

// addPerStep records each process's CPU milliseconds per step in s as
// "cpu:<process>", and returns the processes' names.
func (u cpuUse) addPerStep(s *benchstat.Series, steps int) []string {
	for i, t := range u.ticks {
		s.Add("cpu:"+u.names[i], ticksMs(t)/float64(steps))
	}
	return u.names
}

// cpuKeys are the Series names addPerStep used for names.
func cpuKeys(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "cpu:" + n
	}
	return out
}

// sumTicks is the CPU clock ticks of the processes together.
func sumTicks(pids []int) int64 {
	var n int64
	for _, pid := range pids {
		t, _ := cpuTicks(pid)
		n += t
	}
	return n
}

// processCPU is this process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// apiRequests reads the API server's request counters and request times (benchstat.APIRequests).
func apiRequests(ctx context.Context) benchstat.APIRequests {
	raw, err := h.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return benchstat.ParseAPIRequests(nil)
	}
	return benchstat.ParseAPIRequests(raw)
}

// addRequestsPerStep records the difference of two apiRequests readings per step in s: the
// total as "req", each verb and resource requested in the run as "req:<verb> <resource>" (read
// with GetCounted, so that a kind's median is over every run, not only the runs that made it),
// and the API server's mean time for each of those as "ms:<verb> <resource>".
func addRequestsPerStep(s *benchstat.Series, before, after benchstat.APIRequests, steps int) {
	var total float64
	keys := make([]string, 0, len(after.Count))
	for k := range after.Count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d := (after.Count[k] - before.Count[k]) / float64(steps)
		if d <= 0 {
			continue
		}
		total += d
		s.Add("req:"+k, d)
		if m, ok := benchstat.MeanMillis(before, after, k); ok {
			s.Add("ms:"+k, m)
		}
	}
	s.Add("req", total)
}

// minRequestsShown is the fewest requests per step of a kind, at the median, that the request
// lines print.
const minRequestsShown = 0.1

// requestTimesLine is the API server's median time per request (its mean over a repetition) of
// the verbs and resources of requestsLine, most frequent first.
func requestTimesLine(s *benchstat.Series) string {
	var parts []string
	for _, r := range byFrequency(s) {
		if t := s.Get("ms:" + r.kind); t.N > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", r.kind, t.Median))
		}
	}
	return strings.Join(parts, ", ")
}

// requestKind is a verb and resource of s's "req:" figures and its median requests per step
// over every repetition.
type requestKind struct {
	kind   string
	median float64
}

// byFrequency is the kinds of request of at least minRequestsShown per step at the median,
// most requests first.
func byFrequency(s *benchstat.Series) []requestKind {
	var all []requestKind
	for _, n := range s.Names() {
		if k, ok := strings.CutPrefix(n, "req:"); ok {
			if m := s.GetCounted(n, s.Get("req").N).Median; m >= minRequestsShown {
				all = append(all, requestKind{k, m})
			}
		}
	}
	slices.SortFunc(all, func(a, b requestKind) int {
		if c := cmp.Compare(b.median, a.median); c != 0 {
			return c
		}
		return strings.Compare(a.kind, b.kind)
	})
	return all
}

// requestsLine is the median requests per step in all, then of each verb and resource, largest
// first.
func requestsLine(s *benchstat.Series) string {
	parts := []string{s.Get("req").Format("%.1f", "in all")}
	for _, r := range byFrequency(s) {
		parts = append(parts, fmt.Sprintf("%s %.1f", r.kind, r.median))
	}
	return strings.Join(parts, ", ")
}

// report is the run's table.
type report struct{ *benchstat.Report }

func (r *report) add(name, value, target, verdict string) { r.Add(name, value, target, verdict) }
func (r *report) info(name, value string)                 { r.Info(name, value) }

func mib(kib int64) float64 { return float64(kib) / 1024 }

// rssParts splits the resident set into anonymous memory (heap, stacks) and file-backed pages
// (the binary's code and read-only data, shared and reclaimable), in KiB.
func rssParts(p *proc) (anon, file int64) {
	anon, _ = procStatus(p.pid(), "RssAnon")
	file, _ = procStatus(p.pid(), "RssFile")
	return anon, file
}

// upstreamApplication converts an Application appspec built to Argo CD's type, through JSON.
func upstreamApplication(app *argoapp.Application) (*argov1alpha1.Application, error) {
	raw, err := json.Marshal(app)
	if err != nil {
		return nil, fmt.Errorf("encode application %s: %w", app.Name, err)
	}
	var out argov1alpha1.Application
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode application %s: %w", app.Name, err)
	}
	return &out, nil
}

// auditSpans are the series names of an audited advance's parts, in the order of
// benchstat.AdvanceSpans.
var auditSpans = []string{"audit-to-write", "audit-write", "audit-to-apply", "audit-apply", "audit-to-engine"}

// auditArgs writes an audit policy (every request on an object at level Metadata, one event
// per request) into a folder of its own and returns the kube-apiserver flags that log to a
// file beside it, and that file's path.
func auditArgs() ([]string, string, error) {
	dir, err := os.MkdirTemp("", "aicr-bench-audit-")
	if err != nil {
		return nil, "", err
	}
	policy := filepath.Join(dir, "policy.yaml")
	const rules = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  verbs: ["watch", "list"]
- level: None
  nonResourceURLs: ["*"]
- level: Metadata
`
	if err := os.WriteFile(policy, []byte(rules), 0o644); err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + path, "--audit-log-mode=blocking", "--audit-log-format=json"}, path, nil
}

// addAuditedAdvances adds to s the mean of each part of the advances the audit log holds
// between start and end (one rollout), how many it found, and the applier's reads in them.
func addAuditedAdvances(b *testing.B, s *benchstat.Series, start, end time.Time) {
	b.Helper()
	f, err := os.Open(auditPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	events, err := benchstat.ParseAudit(f)
	if err != nil {
		b.Fatal(err)
	}
	advs := benchstat.Advances(events, benchstat.AdvanceAgents{
		// The fake Argo CD writes through the harness's client, whose configuration testenv made.
		Engine: testenv.UserAgent, Planner: service.UserAgent("planner"), Applier: service.UserAgent("applier"),
	}, start, end)
	if len(advs) == 0 {
		b.Fatalf("the audit log %s holds no advance between %s and %s", auditPath, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	var sums [5]time.Duration
	var total time.Duration
	reads := 0
	for _, a := range advs {
		for i, d := range []time.Duration{a.ToRolloutWrite, a.RolloutWrite, a.ToApply, a.Apply, a.ToEngine} {
			sums[i] += d
		}
		total += a.Total()
		reads += a.Reads
	}
	n := time.Duration(len(advs))
	for i, name := range auditSpans {
		s.Add(name, ms(sums[i]/n))
	}
	s.Add("audit-total", ms(total/n))
	s.Add("audit-n", float64(len(advs)))
	s.Add("audit-reads", float64(reads))
}
