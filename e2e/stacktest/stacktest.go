// Package stacktest runs one local stack (package stack) per e2e test package: Main starts it
// from TestMain, Need hands it to a test, and the helpers wait for the runtime's conditions.
package stacktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts: Argo CD syncs one of the example charts in a few seconds on an idle machine;
// the rest is headroom for a loaded 2-core one running several stacks.
const (
	UpTimeout      = 6 * time.Minute
	RolloutTimeout = 8 * time.Minute
	ChangeTimeout  = 3 * time.Minute
)

var current *stack.Stack

// Main builds the binaries when AICR_BIN_DIR is not set, starts the stack, runs the tests and
// stops it. TestMain passes its result to os.Exit. Missing tools skip every test (Need) unless
// AICR_REQUIRE_TOOLS=1.
func Main(m *testing.M, o stack.Options) int {
	if o.BinDir == "" {
		dir, cleanup, err := stack.BinariesDir("aicr-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		defer cleanup()
		o.BinDir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), UpTimeout)
	defer cancel()
	s, err := stack.Up(ctx, o)
	switch {
	case errors.Is(err, testenv.ErrToolsMissing) && os.Getenv(testenv.EnvRequireTools) != "1":
		fmt.Fprintf(os.Stderr, "%v\ne2e: skipped\n", err)
		return m.Run()
	case err != nil:
		fmt.Fprintln(os.Stderr, "FAIL: start the local stack:", err)
		return 1
	}
	current = s
	code := m.Run()
	// The binaries' shutdown is audited too: stop them before the logs are read.
	if err := s.StopBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the binaries:", err)
		code = 1
	}
	found, err := unreported(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: race audit:", err)
		code = 1
	}
	for _, r := range found {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n(outside every test: at the stack's start, between tests or at its stop)\n", r)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: logs of every process are in %s (kept with AICR_KEEP_TESTENV=1)\n", s.LogsDir())
	}
	if err := s.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the local stack:", err)
		return 1
	}
	return code
}

// Need returns the package's stack, skipping the test when the tools are missing. The test
// fails when any process of the stack writes a race detector's report while it runs (the
// binaries are race-built: make test, or BuildBinaries).
func Need(t *testing.T) *stack.Stack {
	t.Helper()
	if current == nil {
		t.Skip("the local stack is not running (tools missing)")
	}
	auditRaces(t, current)
	return current
}

// races is what the race audit has seen: the reports a test failed for, so that Main reports
// only the others, and the tests already audited.
var races struct {
	mu       sync.Mutex
	reported map[raceAt]bool
	audited  map[*testing.T]bool
}

type raceAt struct {
	log    string
	offset int64
}

// auditRaces fails t, when it ends, with every race report the stack's processes wrote into
// their logs since now. Tests of one package that run in parallel share the stack: each fails
// with the reports of its time.
func auditRaces(t *testing.T, s *stack.Stack) {
	races.mu.Lock()
	defer races.mu.Unlock()
	if races.audited[t] {
		return
	}
	if races.audited == nil {
		races.audited, races.reported = map[*testing.T]bool{}, map[raceAt]bool{}
	}
	races.audited[t] = true
	mark := servicetest.LogMarkOf(s.LogsDir())
	t.Cleanup(func() {
		found, err := servicetest.RacesSince(s.LogsDir(), mark)
		if err != nil {
			t.Errorf("race audit: %v", err)
		}
		races.mu.Lock()
		defer races.mu.Unlock()
		for _, r := range found {
			races.reported[raceAt{r.Log, r.Offset}] = true
			t.Errorf("%v", r)
		}
	})
}

// unreported returns the race reports in the stack's logs that no test failed for.
func unreported(s *stack.Stack) ([]servicetest.LogRace, error) {
	found, err := servicetest.RacesSince(s.LogsDir(), nil)
	races.mu.Lock()
	defer races.mu.Unlock()
	var out []servicetest.LogRace
	for _, r := range found {
		if !races.reported[raceAt{r.Log, r.Offset}] {
			out = append(out, r)
		}
	}
	return out, err
}

// RolledOut applies the bundle and the runtime spec and waits for Ready=True/RolledOut.
func RolledOut(t *testing.T, s *stack.Stack, bundle []byte, spec v1alpha1.ClusterRuntimeSpec) *v1alpha1.ClusterRuntime {
	t.Helper()
	ctx := t.Context()
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRuntime(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rt, err := s.WaitCondition(ctx, RolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// Application reads one Application as Argo CD's type.
func Application(t *testing.T, s *stack.Stack, name string) *argoapp.Application {
	t.Helper()
	u, err := Applications(s).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get application %s: %v", name, err)
	}
	app, err := DecodeApplication(u)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// True reports whether b is set and true (an Application's optional booleans).
func True(b *bool) bool { return b != nil && *b }

// Observer connects to the stack's NATS as the observer, which may read every stream, and
// returns its JetStream; the connection closes when the test ends.
func Observer(t *testing.T, s *stack.Stack, name string) jetstream.JetStream {
	t.Helper()
	nc, err := s.ConnectNATS(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// NewRollout waits until the runtime desires a plan other than from (and other than each of
// stale: a plan desired before the change, such as an earlier failed rollout's) and returns
// the rollout from from to that plan once it has its steps.
func NewRollout(t *testing.T, s *stack.Stack, from string, stale ...string) *v1alpha1.RuntimeRollout {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(t.Context(), ChangeTimeout, "a rollout from plan "+from, func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		if rt.Status.DesiredPlan == "" || rt.Status.DesiredPlan == from || slices.Contains(stale, rt.Status.DesiredPlan) || rt.Status.Rollout == "" {
			return false, fmt.Errorf("desired plan %q, rollout %q (%s)", rt.Status.DesiredPlan, rt.Status.Rollout, stack.Blocker(rt))
		}
		r, err := s.Rollout(ctx, rt.Status.Rollout)
		if err != nil {
			return false, err
		}
		if r.Spec.FromDigest != from || r.Spec.ToDigest != rt.Status.DesiredPlan || len(r.Status.Steps) == 0 {
			return false, fmt.Errorf("rollout %s goes %s -> %s with %d steps", r.Name, r.Spec.FromDigest, r.Spec.ToDigest, len(r.Status.Steps))
		}
		ro = r
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

// DescribeRollout is a rollout's phase, outcome and message and each step's state, for a
// failure message.
func DescribeRollout(ro *v1alpha1.RuntimeRollout) string {
	if ro == nil {
		return "never read"
	}
	out := fmt.Sprintf("%s %s %s: %s;", ro.Name, ro.Status.Phase, ro.Status.Outcome, ro.Status.Message)
	for _, st := range ro.Status.Steps {
		out += fmt.Sprintf(" [%d %s %s %s %s: %s]", st.Index, st.Release, st.Action, st.State, st.Reason, st.Message)
	}
	return out
}
