package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bundle push refuses bad command lines and bad bundles before it talks to a registry.
func TestBundlePushRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: x, version: \"1\"}\ncomponents: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "..", "examples", "bundle.yaml")
	// 127.0.0.1:1 refuses connections: a case that got past its checks would fail differently
	tests := map[string]struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		"no repository": {args: []string{example}, wantCode: ExitUsage, wantErr: "--repository is required"},
		"no file":       {args: []string{"--repository", "127.0.0.1:1/b"}, wantCode: ExitUsage, wantErr: "needs the bundle file"},
		"a repository with a digest": {
			args:     []string{example, "--repository", "127.0.0.1:1/b@sha256:" + strings.Repeat("a", 64)},
			wantCode: ExitUsage, wantErr: "a tag may be given, not a digest",
		},
		"a repository without a path":     {args: []string{example, "--repository", "127.0.0.1:1"}, wantCode: ExitUsage, wantErr: "host[:port]/name is required"},
		"username without password-stdin": {args: []string{example, "--repository", "127.0.0.1:1/b", "--username", "AWS"}, wantCode: ExitUsage, wantErr: "go together"},
		"password and bundle both on stdin": {
			args:     []string{"-", "--repository", "127.0.0.1:1/b", "--username", "AWS", "--password-stdin"},
			wantCode: ExitUsage, wantErr: "both read standard input",
		},
		"an invalid bundle": {args: []string{bad, "--repository", "127.0.0.1:1/b"}, wantCode: ExitFailed, wantErr: "components: at least one component is required"},
		"an unreachable registry": {
			args: []string{example, "--repository", "127.0.0.1:1/b", "--plain-http"}, wantCode: ExitFailed, wantErr: "connection refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), append([]string{"bundle", "push"}, tc.args...), Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr})
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}
