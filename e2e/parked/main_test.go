//go:build e2e

package parked

import (
	"os"
	"strconv"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// parkAfter is the binaries' --park-after: a command that always fails is parked after this many
// failed handlings (the chart's default, 10, takes a minute and a half of backoff).
const parkAfter = 3

// TestMain runs a chaos-shaped stack (stack.ChaosOptions: NATS as a nats-server process, one
// replica of each binary, no Argo CD) with the kube-apiserver's audit log of writes, which
// counts the applier's attempts.
func TestMain(m *testing.M) {
	park := []string{"--park-after=" + strconv.Itoa(parkAfter)}
	os.Exit(stacktest.Main(m, stack.Options{
		Chaos: &stack.ChaosOptions{Namespaces: []string{namespace}, NATSNodes: 1, Audit: true},
		ExtraFlags: map[string][]string{
			v1alpha1.BinaryApplier: park,
			v1alpha1.BinaryPlanner: park,
		},
	}))
}
