//go:build chaos

package chaos

import (
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
)

var (
	flagRollouts = flag.Int("chaos.rollouts", 20, "upgrade rollouts to run under faults (after the first install)")
	flagSeed     = flag.Int64("chaos.seed", 0, "seed of the bundle changes and the fault schedule (0: from the clock; the test logs it)")
)

// leaseFlags make a SIGKILLed leader's successor take over within seconds.
var leaseFlags = []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, stack.Options{
		Chaos: &stack.ChaosOptions{Namespaces: namespaces()},
		ExtraFlags: map[string][]string{
			"planner": leaseFlags, "credrefresher": leaseFlags,
			// drift checks on: a write of the fake Argo CD that took a field from the operator
			// would stall the rollouts
			"readiness": append(slices.Clone(leaseFlags), "--registry-repository="+stack.ChaosRepository),
		},
	}))
}
