package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvBinDir names a folder holding the built binaries (make test and make e2e set it to bin/race,
// their race-built binaries).
const EnvBinDir = "AICR_BIN_DIR"

// BuildBinaries builds the five binaries and kubectl-aicr into dir with the go command, from the
// repository root found above the working directory, with the race detector (as make test's
// bin/race; cgo on, which needs gcc): the tests fail on any race report in a process's log. It
// is what the e2e suite does when AICR_BIN_DIR is not set.
func BuildBinaries(dir string) error {
	root, err := ChartsDir()
	if err != nil {
		return err
	}
	root = filepath.Dir(filepath.Dir(root)) // examples/charts -> repository root
	pkgs := []string{"./cli/cmd/kubectl-aicr"}
	for _, b := range Binaries {
		pkgs = append(pkgs, "./"+b)
	}
	cmd := exec.Command("go", append([]string{"build", "-race", "-o", dir + string(os.PathSeparator)}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build -race %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// BinariesDir returns the folder of the built binaries: AICR_BIN_DIR, or a new temporary folder
// (its name starts with prefix) the binaries are built into, which cleanup removes.
func BinariesDir(prefix string) (dir string, cleanup func(), err error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir, func() {}, nil
	}
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("make a folder for the binaries: %w", err)
	}
	if err := BuildBinaries(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}
