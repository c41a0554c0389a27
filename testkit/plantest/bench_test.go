package plantest_test

import (
	"encoding/json"
	"fmt"
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
