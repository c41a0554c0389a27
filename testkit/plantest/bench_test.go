package plantest_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/plantest"
)

// benchSizes are the stack sizes docs/performance.md reports.
var benchSizes = []int{1000, 10000}

// benchBundle is the generated stack e2e/bench's BenchmarkPlanCompute resolves.
func benchBundle(b *testing.B, n int) *plan.Bundle {
	b.Helper()
	bundle := plantest.LayeredBundle(n, 100)
	if err := bundle.Validate(); err != nil {
		b.Fatalf("generated bundle: %v", err)
	}
	return bundle
}

// benchInputs are the runtime inputs of e2e/bench's BenchmarkPlanCompute: a system placement
// and the operator's and Argo CD's namespaces forbidden.
func benchInputs() plan.Inputs {
	return plan.Inputs{
		Placement: &v1alpha1.Placement{System: &v1alpha1.NodePlacement{
			NodeSelector: map[string]string{"node-role.kubernetes.io/system": "true"}}},
		ForbiddenNamespaces: []string{"aicr-system", "argocd"},
	}
}

// processCPU is the CPU time the process has used, garbage collection included.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlanCompute measures what e2e/bench's BenchmarkPlanCompute reports in process: Resolve
// and the steps of a first rollout (every release installed). Besides ns/op it reports the
// process's CPU time per operation (cpu-ns/op, garbage collection on other cores included),
// which varies less than the wall time on a machine shared with other work.
func BenchmarkPlanCompute(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle, in := benchBundle(b, n), benchInputs()
			b.ReportAllocs()
			cpu0 := processCPU(b)
			defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
			for b.Loop() {
				p, err := plan.Resolve(bundle, in)
				if err != nil {
					b.Fatal(err)
				}
				if steps := plan.Steps(nil, p, plan.StepOptions{}); len(steps) != n {
					b.Fatalf("%d steps for %d releases", len(steps), n)
				}
			}
		})
	}
}

// BenchmarkResolve measures Resolve (values decoding, placement, canonical encoding and the
// digest) for large generated stacks.
func BenchmarkResolve(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle, in := benchBundle(b, n), benchInputs()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := plan.Resolve(bundle, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSteps measures the step derivation of a rollout that changes one release at the
// bottom of a generated stack (every release above it keeps its step-free state).
func BenchmarkSteps(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle, in := benchBundle(b, n), benchInputs()
			from, err := plan.Resolve(bundle, in)
			if err != nil {
				b.Fatal(err)
			}
			bundle.Components[0].Values = json.RawMessage(`{"image":{"tag":"v2"}}`)
			to, err := plan.Resolve(bundle, in)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if steps := plan.Steps(from, to, plan.StepOptions{}); len(steps) != 1 {
					b.Fatalf("%d steps, want 1", len(steps))
				}
			}
		})
	}
}

// BenchmarkParseBundle measures reading a large bundle document.
func BenchmarkParseBundle(b *testing.B) {
	doc, err := json.Marshal(benchBundle(b, 1000))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan.ParseBundle(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodedPlanRetained decodes a GPU-stack plan of 40 releases (about 0.5 MiB of
// canonical JSON, the most a plan ConfigMap holds is 900 KiB) as the services' plan caches do,
// and reports the heap each decoded plan keeps alive after a collection (retained-KiB/plan): what
// a cache of 64 plans (readiness's) costs, per plan.
func BenchmarkDecodedPlanRetained(b *testing.B) {
	p, err := plan.Resolve(plantest.GPUStackBundle(40, 10), plan.Inputs{})
	if err != nil {
		b.Fatal(err)
	}
	data := append([]byte(nil), p.Canonical()...)
	const kept = 16
	var retained float64
	for b.Loop() {
		plans := make([]*plan.Plan, 0, kept)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range kept {
			q, err := plan.Decode(data, p.Digest())
			if err != nil {
				b.Fatal(err)
			}
			plans = append(plans, q)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained += float64(after.HeapAlloc-before.HeapAlloc) / kept
		runtime.KeepAlive(plans)
	}
	b.ReportMetric(retained/float64(b.N)/1024, "retained-KiB/plan")
	b.ReportMetric(float64(len(data))/1024, "canonical-KiB/plan")
}
