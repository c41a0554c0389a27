//go:build e2e

package edges

import (
	"os"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestMain runs readiness with --drift-reports=false: every repair and every SpecDrifted or
// InventoryDrift the tests see is the planner's decision from the Applications themselves. The
// planner's resync is 10 min, longer than any wait of the tests (promptTimeout): every repair
// they see comes from the planner's watch of the Applications, none from the resync. That the
// resync alone forces every edit back when every event and report is lost is the planner's
// TestTheResyncAloneForcesBackWhatNoEventOrReportTold (planner/internal/controller).
func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, stack.Options{ExtraFlags: map[string][]string{
		v1alpha1.BinaryReadiness: {"--drift-reports=false"},
		v1alpha1.BinaryPlanner:   {"--drift-resync=10m"},
	}}))
}
