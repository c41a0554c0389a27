//go:build integration

package logstream

import (
	"fmt"
	"os"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// binDir holds the built binaries: AICR_BIN_DIR, or a folder TestMain builds them into.
var binDir string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, cleanup, err := stack.BinariesDir("aicr-logstream-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer cleanup()
	binDir = dir
	return testenv.RunMain(m, testenv.Options{})
}
