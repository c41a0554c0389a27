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

// TestMain runs every binary at --log-level=debug (the last flag wins), so the scan covers the
// most a log ever says.
func TestMain(m *testing.M) {
	flags := map[string][]string{}
	for _, b := range stack.Binaries {
		flags[b] = []string{"--log-level=debug"}
	}
	flags["credrefresher"] = append(flags["credrefresher"], "--check-interval="+checkInterval)
	os.Exit(stacktest.Main(m, stack.Options{ExtraFlags: flags}))
}
