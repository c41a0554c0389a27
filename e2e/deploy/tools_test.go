package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root: the folder holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's folder")
		}
		dir = parent
	}
}

// tool finds a command: in $AICR_TOOLS_BIN, in hack/tools.sh's cache (when built), or on the
// PATH. It skips the test when the tool is missing, or fails it with AICR_REQUIRE_TOOLS=1.
func tool(t testing.TB, name, hint string) string {
	t.Helper()
	var candidates []string
	if dir := os.Getenv("AICR_TOOLS_BIN"); dir != "" {
		candidates = append(candidates, filepath.Join(dir, name))
	}
	if out, err := exec.Command(filepath.Join(repoRoot(t), "hack", "tools.sh"), "path", name).Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			candidates = append(candidates, filepath.Join(dir, "bin", name))
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	msg := name + " not found in $AICR_TOOLS_BIN, the tools cache or PATH (" + hint + ")"
	if os.Getenv("AICR_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// run runs a command and returns its standard output; standard error is in the error.
func run(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &cmdError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type cmdError struct {
	err    error
	stderr string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
