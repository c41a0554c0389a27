package stack

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDir is the folder holding the binaries the stack runs, and kubectl-aicr.
func (s *Stack) BinDir() string { return s.opts.BinDir }

// KubectlAICR runs the kubectl-aicr plugin as the environment's admin (its kubeconfig) with args,
// and returns what it printed on stdout; the error carries stderr.
func (s *Stack) KubectlAICR(ctx context.Context, args ...string) (string, error) {
	return s.KubectlAICRInput(ctx, "", args...)
}

// KubectlAICRInput is KubectlAICR with stdin as the plugin's standard input (a password for
// --password-stdin).
func (s *Stack) KubectlAICRInput(ctx context.Context, stdin string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(s.opts.BinDir, "kubectl-aicr"), append(args, "--kubeconfig", s.Env.Kubeconfig)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl-aicr %v: %w: %s", args, err, stderr.String())
	}
	return stdout.String(), nil
}
