//go:build e2e

package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/testenv"
	"github.com/aicr-run/aicr-operator/e2e/stack"
)

// Named timeouts: Argo CD syncs one of the example charts in a few seconds on an idle machine;
// the rest is headroom for a loaded 2-core one.
const (
	upTimeout      = 6 * time.Minute
	rolloutTimeout = 8 * time.Minute
	changeTimeout  = 3 * time.Minute
)

var st *stack.Stack

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binDir := os.Getenv(stack.EnvBinDir)
	if binDir == "" {
		dir, err := os.MkdirTemp("", "aicr-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := stack.BuildBinaries(dir); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		binDir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	s, err := stack.Up(ctx, stack.Options{BinDir: binDir})
	switch {
	case errors.Is(err, testenv.ErrToolsMissing) && os.Getenv(testenv.EnvRequireTools) != "1":
		fmt.Fprintf(os.Stderr, "%v\ne2e: skipped\n", err)
		return m.Run() // every test calls need(t), which skips
	case err != nil:
		fmt.Fprintln(os.Stderr, "FAIL: start the local stack:", err)
		return 1
	}
	st = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: logs of every process are in %s/logs (kept: AICR_KEEP_TESTENV=1)\n", s.Dir)
	}
	if err := s.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the local stack:", err)
		return 1
	}
	return code
}

// need returns the stack, skipping when the tools are missing.
func need(t *testing.T) *stack.Stack {
	t.Helper()
	if st == nil {
		t.Skip("the local stack is not running (tools missing)")
	}
	return st
}

// rolledOut applies the example bundle at version and waits for Ready=True/RolledOut.
func rolledOut(t *testing.T, s *stack.Stack, bundle []byte, spec v1alpha1.ClusterRuntimeSpec) *v1alpha1.ClusterRuntime {
	t.Helper()
	ctx := t.Context()
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRuntime(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rt, err := s.WaitCondition(ctx, rolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}
