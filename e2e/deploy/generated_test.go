package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// TestNATSPermissionsAreGenerated proves every copy of the bus's permissions outside Go is the
// one table of shared/bus, as make generate writes it: the chart's files/nats-permissions.json and
// the tables of docs/security.md. (The docker-compose route renders it when it starts.)
func TestNATSPermissionsAreGenerated(t *testing.T) {
	root := charttest.RepoRoot(t)
	t.Run("the chart's nats-permissions.json", func(t *testing.T) {
		got, err := os.ReadFile(filepath.Join(charttest.ChartDir(t), "files", "nats-permissions.json"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(bus.PermissionsJSON()), string(got)); diff != "" {
			t.Errorf("files/nats-permissions.json is stale; run make generate (-want +got):\n%s", diff)
		}
	})
	t.Run("docs/security.md", func(t *testing.T) {
		doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := bus.ReplaceDocSection(string(doc))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(doc)); diff != "" {
			t.Errorf("the tables of docs/security.md are stale; run make generate (-want +got):\n%s", diff)
		}
	})
}
