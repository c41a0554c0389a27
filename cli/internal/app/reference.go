package app

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Reference renders docs/cli.md from the commands' own help: for each command its summary, its
// description, its usage, its examples and its flags, then the flags every command takes. A test
// keeps docs/cli.md equal to it (go test ./cli/internal/app -run TestCLIReference -update
// rewrites the page).
func Reference() string {
	root := newRoot(&options{env: DefaultEnv()})
	var b strings.Builder
	b.WriteString("<!-- Generated from the commands' help by cli/internal/app.Reference; do not edit.\n")
	b.WriteString("     make docs-cli rewrites it, and a test fails when it is stale. -->\n\n")
	b.WriteString("# kubectl aicr: the command reference\n\n")
	b.WriteString(root.Long + "\n\n")
	b.WriteString("Install: a release (`make release`) has `kubectl-aicr` for linux, darwin and windows on amd64 and\n")
	b.WriteString("arm64 as archives with a krew manifest (`krew/aicr.yaml`), as `make plugin` builds into `dist/plugin`;\n")
	b.WriteString("`kubectl krew install --manifest=krew/aicr.yaml`, or put the binary on the PATH and kubectl finds it.\n")
	b.WriteString("A stripped linux/amd64 binary is about 51 MB: kubectl's flags and printers come from\n")
	b.WriteString("k8s.io/cli-runtime, whose genericclioptions package links kustomize's embedded OpenAPI documents.\n")
	b.WriteString("The plugin links no NATS server and no Argo CD (hack/verify.sh checks the first).\n")
	b.WriteString("Exit status: 0 done, 1 failed (the error on stderr), 2 a command-line mistake; `diff` exits 1\n")
	b.WriteString("when it finds differences and 2 when it fails, as `kubectl diff` does.\n\n")
	b.WriteString("```\n" + strings.TrimRight(root.Example, "\n") + "\n```\n\n")
	groups := root.Groups()
	for _, g := range groups {
		fmt.Fprintf(&b, "**%s**", g.Title)
		var names []string
		for _, c := range root.Commands() {
			if c.GroupID == g.ID && c.IsAvailableCommand() {
				names = append(names, fmt.Sprintf("[%s](#%s)", c.Name(), anchor(c)))
			}
		}
		b.WriteString(" " + strings.Join(names, ", ") + "\n\n")
	}
	for _, g := range groups {
		for _, c := range root.Commands() {
			if c.GroupID != g.ID || !c.IsAvailableCommand() {
				continue
			}
			writeCommand(&b, c) // and its subcommands
		}
	}
	b.WriteString("## Flags of every command\n\n")
	b.WriteString("kubectl's connection flags (k8s.io/cli-runtime), and the plugin's own.\n\n")
	b.WriteString("```\n" + root.PersistentFlags().FlagUsagesWrapped(100) + "```\n")
	return b.String()
}

func anchor(c *cobra.Command) string {
	return strings.ReplaceAll(strings.ToLower(c.CommandPath()), " ", "-")
}

func writeCommand(b *strings.Builder, c *cobra.Command) {
	fmt.Fprintf(b, "## %s\n\n", c.CommandPath())
	fmt.Fprintf(b, "%s.\n\n", c.Short)
	if c.Long != "" {
		b.WriteString(strings.TrimRight(c.Long, "\n") + "\n\n")
	}
	b.WriteString("```\n" + c.UseLine() + "\n```\n\n")
	if c.Example != "" {
		b.WriteString("Examples:\n\n```shell\n" + strings.TrimRight(c.Example, "\n") + "\n```\n\n")
	}
	if fl := c.LocalNonPersistentFlags(); fl.HasAvailableFlags() {
		b.WriteString("Flags:\n\n```\n" + fl.FlagUsagesWrapped(100) + "```\n\n")
	}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			writeCommand(b, sub)
		}
	}
}
