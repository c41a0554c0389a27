package modgraph

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/kubeaccess"
)

// TestDeployablesTableSaysWhatEachBinaryReadsAndWrites keeps docs/architecture.md's deployables
// table true to the Kubernetes calls each binary declares (shared/kubeaccess, which the chart
// grants exactly): the Reads column names every resource the binary gets, lists or watches, the
// Writes column every one it creates, updates, patches or deletes, and says "nothing" only when
// it writes none. Its leader Lease is left out: every leader-elected binary has one.
func TestDeployablesTableSaysWhatEachBinaryReadsAndWrites(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := deployables(string(doc))
	for _, b := range v1alpha1.Binaries() {
		row, ok := rows[b]
		if !ok {
			t.Errorf("docs/architecture.md's deployables table has no row for %s", b)
			continue
		}
		reads, writes := map[string]bool{}, map[string]bool{}
		for _, n := range kubeaccess.Needs(b) {
			if n.Resource == "leases" {
				continue
			}
			res := strings.TrimSuffix(strings.SplitN(n.Resource, "/", 2)[0], "s")
			for _, v := range n.Verbs {
				switch v {
				case "get", "list", "watch":
					reads[res] = true
				default:
					writes[res] = true
				}
			}
		}
		check := func(column, text string, want map[string]bool) {
			flat := strings.ToLower(strings.ReplaceAll(text, " ", ""))
			for _, res := range slices.Sorted(maps.Keys(want)) {
				if !strings.Contains(flat, res) {
					t.Errorf("docs/architecture.md: %s's %s column %q does not name %ss (shared/kubeaccess declares it)", b, column, text, res)
				}
			}
		}
		check("Reads", row.reads, reads)
		check("Writes to Kubernetes", row.writes, writes)
		if nothing := strings.TrimSpace(row.writes) == "nothing"; nothing != (len(writes) == 0) {
			t.Errorf("docs/architecture.md: %s's Writes column is %q; shared/kubeaccess declares writes of %v", b, row.writes, slices.Sorted(maps.Keys(writes)))
		}
	}
}

// deployablesRow is one binary's row of the deployables table.
type deployablesRow struct{ reads, writes string }

// deployables reads the table under "## The deployables": Binary | Owns | Reads | Writes | NATS.
func deployables(doc string) map[string]deployablesRow {
	out := map[string]deployablesRow{}
	on := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			on = line == "## The deployables"
		case on && strings.HasPrefix(line, "| "):
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			if len(cells) == 5 {
				out[cells[0]] = deployablesRow{reads: cells[2], writes: cells[3]}
			}
		}
	}
	return out
}
