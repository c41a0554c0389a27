//go:build e2e

package credentials

import (
	"os"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
)

// refreshInterval is credrefresher's --refresh-interval: short, so a rotated password reaches
// the Secret within the test's patience.
const refreshInterval = 20 * time.Second

func TestMain(m *testing.M) {
	os.Exit(stacktest.Main(m, stack.Options{AWSAuth: &stack.AWSAuth{RefreshInterval: refreshInterval, TokenLifetime: time.Hour}}))
}
