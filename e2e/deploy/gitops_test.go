//go:build integration

package deploy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
)

// TestChartRendersTheSameBytesTwice is the GitOps property: Argo CD renders the chart with helm
// template (where lookup finds nothing) on every refresh, so any generated value (a password, a
// bcrypt salt, a CA) would make the operator permanently OutOfSync and rotate its own
// credentials. Each configuration, and every example values file, renders byte for byte the same
// twice, and nothing the chart renders holds secret material.
func TestChartRendersTheSameBytesTwice(t *testing.T) {
	helm := charttest.Tool(t, "helm")
	configs := map[string][]string{
		"defaults":                         {"--set", "registry.repository=" + charttest.Repository},
		"aws, a NATS cluster, every extra": {"--set", "registry.repository=" + charttest.Repository, "--set", "registry.auth=aws", "--set", "nats.replicas=3", "--set", "networkPolicy.enabled=true", "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true"},
		"cert-manager":                     {"--set", "registry.repository=" + charttest.Repository, "--set", "certManager.enabled=true"},
		"your own Secrets":                 {"--set", "registry.repository=" + charttest.Repository, "--set", "nats.auth.existingSecret=a", "--set", "nats.tls.existingSecret=b", "--set", "admission.tls.existingSecret=c"},
	}
	files, _ := filepath.Glob(filepath.Join(charttest.RepoRoot(t), "deploy", "values", "*.yaml"))
	for _, f := range files {
		configs[filepath.Base(f)] = []string{"-f", f}
	}
	for name, args := range configs {
		t.Run(name, func(t *testing.T) {
			render := func() string {
				out, err := charttest.Run(t, "", nil, helm, append([]string{"template", charttest.Release, charttest.ChartDir(t),
					"--namespace", charttest.Namespace, "--kube-version", charttest.KubeVersion,
					"--api-versions", charttest.StackAPIVersions[0], "--api-versions", charttest.StackAPIVersions[1]}, args...)...)
				if err != nil {
					t.Fatalf("helm template: %v", err)
				}
				return out
			}
			first, second := render(), render()
			if first != second {
				a, b := strings.Split(first, "\n"), strings.Split(second, "\n")
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Fatalf("two renders differ at line %d:\n  %s\n  %s", i+1, a[i], b[i])
					}
				}
				t.Fatalf("two renders differ in length: %d and %d lines", len(a), len(b))
			}
			for _, marker := range []string{"PRIVATE KEY", "BEGIN CERTIFICATE", "$2a$", "$2b$"} {
				if strings.Contains(first, marker) {
					t.Errorf("the rendered chart holds secret material (%q)", marker)
				}
			}
		})
	}
}
