package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bundle import's command-line mistakes exit 2 naming the flag and what is accepted; a bad
// bundle folder exits 1 naming the path.
func TestBundleImportArguments(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"no folder", []string{"bundle", "import", "--registry", "r.example/aicr"}, "", ExitUsage, "needs the bundle folder"},
		{"no registry", []string{"bundle", "import", "dir"}, "", ExitUsage, "--registry is required"},
		{"a registry that is not a repository", []string{"bundle", "import", "dir", "--registry", "oci://"}, "", ExitUsage, "host[:port]/name is required"},
		{"a user without a password", []string{"bundle", "import", "dir", "--registry", "r.example/aicr", "--username", "admin"}, "", ExitUsage, "go together"},
		{"an empty password on stdin", []string{"bundle", "import", "dir", "--registry", "r.example/aicr", "--username", "admin", "--password-stdin"}, "\n", ExitUsage, "held no password"},
		{"a folder that is not there", []string{"bundle", "import", "testdata/no-such-bundle", "--registry", "r.example/aicr"}, "", ExitFailed, "testdata/no-such-bundle: cannot read the bundle folder"},
		{"bundle alone shows its help", []string{"bundle"}, "", ExitUsage, "import"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), tt.args, Env{Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &errOut})
			if code != tt.code || !strings.Contains(out.String()+errOut.String(), tt.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tt.code, tt.want, out.String(), errOut.String())
			}
		})
	}
}

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
