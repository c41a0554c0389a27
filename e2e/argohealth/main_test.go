//go:build e2e

package argohealth

import (
	"os"
	"testing"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{ArgoCD: true, Registry: true}))
}
