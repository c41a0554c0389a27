package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// graph -f draws a saved rollout without a cluster: the recorded example rollout of the docs,
// and with --bundle the bundle's dependencies.
func TestGraphFromAFile(t *testing.T) {
	rollout := filepath.Join("..", "..", "..", "docs", "images", "example-rollout.yaml")
	for name, tc := range map[string]struct {
		args       []string
		want       []string
		wantStderr string
	}{
		"text": {[]string{"graph", "-f", rollout}, []string{"rollout r-5a9d2e5ab6-none: 5/9 steps succeeded", "● gpu-operator", "#6  Install  InProgress"}, ""},
		"dot": {[]string{"graph", "-f", rollout, "-o", "dot"}, []string{`"nodewright-customizations" -> "gpu-operator";`,
			`"gpu-operator-readiness" [label="gpu-operator-readiness (gate)\n#8 Install · Pending"`}, ""},
		"name": {[]string{"graph", "-f", rollout, "-o", "name"}, []string{"runtimerollout.operator.aicr.run/r-5a9d2e5ab6-none\n"}, ""},
		"another bundle's dependencies, with a warning": {[]string{"graph", "-f", rollout, "--bundle", examples(t, "bundle.yaml"), "-o", "mermaid"},
			[]string{"flowchart LR"}, "warning: --bundle resolves to sha256:"},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runNoCluster(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
			if tc.wantStderr != "" && !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.wantStderr)
			}
		})
	}
	notRollout := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(notRollout, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		"graph -f " + notRollout:               `kind "ConfigMap"; a RuntimeRollout is expected`,
		"graph r-1 -f " + rollout:              "give a rollout name or -f, not both",
		"graph --bundle " + rollout:            "--bundle and --runtime go with -f",
		"graph -f " + rollout + " --runtime x": "--runtime goes with --bundle",
	} {
		code, _, stderr := runNoCluster(t, strings.Fields(args)...)
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want %q", args, code, stderr, want)
		}
	}
}
