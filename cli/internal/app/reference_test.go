package app

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the commands' help")

// docs/cli.md is the commands' help: this fails when a command, a flag or a text changed and the
// page was not regenerated (make docs-cli).
func TestCLIReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "cli.md")
	want := Reference()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/cli.md is stale: run make docs-cli (go test ./cli/internal/app -run TestCLIReference -update)")
	}
}

// Every command has --help with examples, and the reference has a section for each.
func TestHelpOfEveryCommand(t *testing.T) {
	root := newRoot(&options{env: DefaultEnv()})
	ref := Reference()
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" {
			continue
		}
		var out bytes.Buffer
		code := Main(context.Background(), []string{c.Name(), "--help"}, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out})
		if code != 0 || !strings.Contains(out.String(), "Examples:\n  ") || !strings.Contains(out.String(), "Usage:\n  kubectl aicr "+c.Name()) {
			t.Errorf("%s --help: exit %d, without usage or examples:\n%s", c.Name(), code, out.String())
		}
		if n := strings.Count(ref, "\n## kubectl aicr "+c.Name()+"\n"); n > 1 {
			t.Errorf("the reference has %d sections for %s, want one", n, c.Name())
		}
		for _, sub := range c.Commands() {
			if n := strings.Count(ref, "\n## "+sub.CommandPath()+"\n"); sub.IsAvailableCommand() && n != 1 {
				t.Errorf("the reference has %d sections for %s, want one", n, sub.CommandPath())
			}
		}
		if !strings.Contains(ref, "\n## kubectl aicr "+c.Name()+"\n") {
			t.Errorf("the reference has no section for %s", c.Name())
		}
	}
}
