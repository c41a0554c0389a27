//go:build e2e

package secrets

import (
	"os"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
)

// checkInterval is credrefresher's --check-interval: short, so a broken and a repaired Secret
// are reported within the test's patience.
const checkInterval = "5s"

func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, stack.Options{ExtraFlags: map[string][]string{
		"credrefresher": {"--check-interval=" + checkInterval},
	}}))
}
