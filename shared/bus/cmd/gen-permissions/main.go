// Command gen-permissions writes the bus's NATS permissions, from the one table in shared/bus,
// where they are needed outside Go: the Helm chart's files/nats-permissions.json and the tables
// of docs/security.md. make generate runs it; make verify fails when either is stale. (The
// docker-compose route renders its NATS configuration from the same table when it starts:
// e2e/cmd/aicr-compose-node.)
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

func main() {
	jsonPath := flag.String("json", "", "write the chart's nats-permissions.json here")
	docPath := flag.String("doc", "", "replace the generated section of this Markdown file")
	flag.Parse()
	if err := run(*jsonPath, *docPath); err != nil {
		fmt.Fprintln(os.Stderr, "gen-permissions:", err)
		os.Exit(1)
	}
}

func run(jsonPath, docPath string) error {
	if jsonPath == "" && docPath == "" {
		return fmt.Errorf("nothing to do: pass -json FILE, -doc FILE")
	}
	if jsonPath != "" {
		if err := os.WriteFile(jsonPath, bus.PermissionsJSON(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", jsonPath, err)
		}
	}
	if docPath != "" {
		doc, err := os.ReadFile(docPath)
		if err != nil {
			return fmt.Errorf("read %s: %w", docPath, err)
		}
		out, err := bus.ReplaceDocSection(string(doc))
		if err != nil {
			return fmt.Errorf("%s: %w", docPath, err)
		}
		if err := os.WriteFile(docPath, []byte(out), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", docPath, err)
		}
	}
	return nil
}
