package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// RestartTimeout bounds the start of a process again after HoldProcess.
const RestartTimeout = 2 * time.Minute

// HoldArgoCD stops Argo CD's application controller: nothing is compared or synced until the
// returned function starts it again (the test's cleanup does, if the test does not).
func HoldArgoCD(t *testing.T, s *stack.Stack) (release func()) {
	t.Helper()
	return HoldProcess(t, s, testenv.ProcAppController)
}

// HoldProcess stops one of the stack's processes (testenv.ProcKwok, ProcAppController, ...)
// and returns the function that starts it again; the test's cleanup calls it too, and a second
// call does nothing.
func HoldProcess(t *testing.T, s *stack.Stack, proc string) (release func()) {
	t.Helper()
	if err := s.Env.StopProcess(proc); err != nil {
		t.Fatal(err)
	}
	held := true
	release = func() {
		if !held {
			return
		}
		held = false
		ctx, cancel := context.WithTimeout(context.Background(), RestartTimeout)
		defer cancel()
		if err := s.Env.StartProcess(ctx, proc); err != nil {
			t.Fatalf("start %s again: %v", proc, err)
		}
	}
	t.Cleanup(release)
	return release
}
