//go:build e2e

package aicrimport

import (
	"os"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m, stack.Options{})) }
