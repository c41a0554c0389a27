//go:build chaos || e2e

package chaos

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
)

var (
	flagRollouts  = flag.Int("chaos.rollouts", defaultRollouts, "rollouts to run under faults after the first install (more run while a fault kind is below -chaos.min-faults)")
	flagSeed      = flag.Int64("chaos.seed", 0, "seed of the bundle changes, approvals and the fault schedule (0: a fresh one from the clock, each run; the test logs the command that replays it)")
	flagRecovery  = flag.Duration("chaos.recovery-bound", defaultRecoveryBound, "fail when a fault kind's p99 stall of the rollout in flight is above this (0: report only)")
	flagDuration  = flag.Duration("chaos.duration", defaultDuration, "start no rollout after this long (0: no limit); the run fails if -chaos.rollouts or -chaos.min-faults was not reached by then")
	flagMinFaults = flag.Int("chaos.min-faults", 1, "fail unless every fault kind was injected at least this often")
	flagMinStalls = flag.Int("chaos.min-stalls", 0, "run more rollouts while a fault kind has fewer stall measurements than this (a fault measures one when it hits a rollout in flight); -chaos.duration still ends the run")
	flagOnly      = flag.String("chaos.only", "", "deal only these fault kinds (comma-separated names of the report; empty: every kind), to aim a run at one")
	flagClockSkew = flag.Duration("chaos.clock-skew", 5*time.Second, "how far the clock of the second planner candidate (planner-1) is off, for the whole run (0: none)")
	flagNATSNodes = flag.Int("chaos.nats-nodes", 3, "nats-server processes: 1, or 3 for a JetStream cluster with streams at replication 3")
	flagArgoCD    = flag.Bool("chaos.argocd", false, "run the variant with real Argo CD, kwok and a registry ("+argoCDTest+", make chaos-argocd) instead of the fake Argo CD")
)

// Leader election of the chaos stack: a candidate takes over within seconds of a leader's
// death or pause (the chart's defaults are 15 s / 10 s / 2 s).
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = time.Second
)

var leaseFlags = []string{"--leader-elect-lease-duration=" + leaseDuration.String(),
	"--leader-elect-renew-deadline=" + renewDeadline.String(), "--leader-elect-retry-period=" + retryPeriod.String()}

// skewedPlanner is the planner candidate whose clock is off by -chaos.clock-skew: its steps'
// and commands' times disagree with the other's by that much whenever leadership changes hands.
const skewedPlanner = "planner-1"

// stackTest and argoCDTest are the tests that need the stack (the fake Argo CD's, and with
// -chaos.argocd real Argo CD's); the others are unit tests of the audits and the fake Argo CD.
const (
	stackTest  = "TestRolloutsCompleteUnderFaults"
	argoCDTest = "TestRolloutsWithArgoCDUnderFaults"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if run := flag.Lookup("test.run").Value.String(); run != "" {
		re, err := regexp.Compile(strings.Split(run, "/")[0])
		if err == nil && !re.MatchString(stackTest) && !re.MatchString(argoCDTest) {
			os.Exit(m.Run()) // -run selects unit tests only: no stack
		}
	}
	env := map[string][]string{}
	if *flagClockSkew != 0 {
		// planner/internal/app.EnvTestClockOffset: a test-only setting no chart sets.
		env[skewedPlanner] = []string{"AICR_TEST_CLOCK_OFFSET=" + flagClockSkew.String()}
	}
	readinessFlags := slices.Clone(leaseFlags)
	nss := namespaces()
	if *flagArgoCD {
		nss = argoCDNamespaces()
	} else {
		// drift checks on: a write of the fake Argo CD that took a field from the operator
		// would stall the rollouts (with real Argo CD, the registry is readiness's repository)
		readinessFlags = append(readinessFlags, "--registry-repository="+stack.ChaosRepository)
	}
	os.Exit(stacktest.Main(m, stack.Options{
		Chaos: &stack.ChaosOptions{
			Env:        env,
			Namespaces: nss,
			Replicas:   map[string]int{"applier": 2, "admission": 2, "planner": 2, "readiness": 2, "credrefresher": 2},
			NATSNodes:  *flagNATSNodes,
			Audit:      true,
			APIProxies: true,
			ArgoCD:     *flagArgoCD,
		},
		ExtraFlags: map[string][]string{"planner": leaseFlags, "credrefresher": leaseFlags, "readiness": readinessFlags},
	}))
}
