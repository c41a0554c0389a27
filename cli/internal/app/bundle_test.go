package app

import (
	"bytes"
	"context"
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
		{"a user without a password", []string{"bundle", "import", "dir", "--registry", "r.example/aicr", "--registry-username", "admin"}, "", ExitUsage, "go together"},
		{"an empty password on stdin", []string{"bundle", "import", "dir", "--registry", "r.example/aicr", "--registry-username", "admin", "--registry-password-stdin"}, "\n", ExitUsage, "held no password"},
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
