package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// ArgoCDRestartTimeout bounds the start of Argo CD's application controller after HoldArgoCD.
const ArgoCDRestartTimeout = 2 * time.Minute

// HoldArgoCD stops Argo CD's application controller: nothing is compared or synced until the
// returned function starts it again (the test's cleanup does, if the test does not).
func HoldArgoCD(t *testing.T, s *stack.Stack) (release func()) {
	t.Helper()
	if err := s.Env.StopProcess(testenv.ProcAppController); err != nil {
		t.Fatal(err)
	}
	held := true
	release = func() {
		if !held {
			return
		}
		held = false
		ctx, cancel := context.WithTimeout(context.Background(), ArgoCDRestartTimeout)
		defer cancel()
		if err := s.Env.StartProcess(ctx, testenv.ProcAppController); err != nil {
			t.Fatalf("start Argo CD's application controller again: %v", err)
		}
	}
	t.Cleanup(release)
	return release
}
