package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
)

// The chart's CRDs are the generated ones: make generate copies shared/api/crds into the chart.
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := charttest.RepoRoot(t)
	src, err := filepath.Glob(filepath.Join(root, "shared", "api", "crds", "*.yaml"))
	if err != nil || len(src) == 0 {
		t.Fatalf("no CRDs in shared/api/crds (err %v)", err)
	}
	chartDir := filepath.Join(root, "deploy", "charts", "aicr-operator", "files", "crds")
	copies, err := filepath.Glob(filepath.Join(chartDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if diff := cmp.Diff(names(src), names(copies)); diff != "" {
		t.Fatalf("chart CRD files differ from shared/api/crds (-want +got); run make generate:\n%s", diff)
	}
	for _, p := range src {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		if string(want) != string(got) {
			t.Errorf("%s in the chart is stale; run make generate:\n%s", filepath.Base(p), cmp.Diff(string(want), string(got)))
		}
	}
}
