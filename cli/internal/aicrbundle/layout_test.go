package aicrbundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exampleDir is the AICR-layout example the README's demo imports.
func exampleDir(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "aicr-bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// copyBundle copies the bundle folder src into a temporary folder and returns it.
func copyBundle(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "bundle")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func readRecipe(t *testing.T, p string) *Recipe {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRecipe(p, raw)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReadTheExample(t *testing.T) {
	l, err := Read(exampleDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if l.Checked == 0 {
		t.Error("no checksums.txt entry was verified")
	}
	type row struct {
		Dir, Name, Namespace, Component string
		Kind                            Kind
		Chart, Version                  string
	}
	var got []row
	for _, f := range l.Folders {
		r := row{Dir: f.Dir, Name: f.Name, Namespace: f.Namespace, Component: f.Component, Kind: f.Kind}
		if f.Upstream != nil {
			r.Chart, r.Version = f.Upstream.Name(), f.Upstream.Version
		}
		got = append(got, r)
	}
	want := []row{
		{"001-cert-manager", "cert-manager", "cert-manager", "cert-manager", KindUpstream, "cert-manager", "v1.20.2"},
		{"002-kube-prometheus-stack", "kube-prometheus-stack", "monitoring", "kube-prometheus-stack", KindUpstream, "kube-prometheus-stack", "77.12.0"},
		{"003-nodewright-operator", "nodewright-operator", "skyhook", "nodewright-operator", KindUpstream, "nodewright", "v0.17.1"},
		{"004-nodewright-customizations", "nodewright-customizations", "skyhook", "nodewright-customizations", KindLocalChart, "", ""},
		{"005-gpu-operator", "gpu-operator", "gpu-operator", "gpu-operator", KindUpstream, "gpu-operator", "v26.7.0"},
		{"006-gpu-operator-readiness", "gpu-operator-readiness", "gpu-operator", "gpu-operator", KindLocalChart, "", ""},
		{"007-network-operator", "network-operator", "nvidia-network-operator", "network-operator", KindUpstream, "network-operator", "26.4.1"},
		{"008-nvsentinel", "nvsentinel", "nvsentinel", "nvsentinel", KindUpstream, "nvsentinel", "v0.9.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("folders (-want +got):\n%s", diff)
	}
	// gpu-operator's values: cluster-values.yaml merged into values.yaml, nested mappings key by
	// key and the device plugin's env list replaced whole.
	gpu := l.Folders[4].Values
	op := gpu["operator"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"cpu": "500m", "memory": "1Gi"}, op["resources"].(map[string]any)["limits"]); diff != "" {
		t.Errorf("operator.resources.limits (-want +got):\n%s", diff)
	}
	env := gpu["devicePlugin"].(map[string]any)["env"]
	if diff := cmp.Diff([]any{map[string]any{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}}, env); diff != "" {
		t.Errorf("devicePlugin.env (-want +got):\n%s", diff)
	}
	if got := gpu["driver"].(map[string]any)["version"]; got != "595.91.07" {
		t.Errorf("driver.version %v, want the values.yaml pin kept", got)
	}
}

func TestUpstreamEnvQuoting(t *testing.T) {
	tests := []struct{ line, want, err string }{
		{"CHART=cert-manager", "cert-manager", ""},
		{"CHART='oci://ghcr.io/nvidia/nodewright/charts/nodewright'", "oci://ghcr.io/nvidia/nodewright/charts/nodewright", ""},
		{`CHART='it'\''s'`, "it's", ""},
		{"CHART=$(rm -rf /)", "", "single-quoted"},
		{"CHART='unterminated", "", "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), UpstreamEnvFile)
			if err := os.WriteFile(p, []byte(tt.line+"\nVERSION=1.0.0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			u, err := readUpstreamEnv(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), p) {
					t.Fatalf("error %v; want one naming %s and %q", err, p, tt.err)
				}
				return
			}
			if err != nil || u.Chart != tt.want {
				t.Fatalf("CHART %q, %v; want %q", u.Chart, err, tt.want)
			}
		})
	}
}

// Bad layouts fail with the path of the offending file or folder and what is accepted.
func TestBadLayouts(t *testing.T) {
	tests := []struct {
		name string
		// edit breaks a copy of the example (its checksums.txt removed unless kept)
		edit      func(t *testing.T, dir string)
		keepSums  bool
		recipe    bool // import with the bundle's recipe.yaml
		wantPath  string
		wantParts []string
	}{
		{name: "missing values.yaml",
			edit:     func(t *testing.T, d string) { remove(t, d, "005-gpu-operator/values.yaml") },
			wantPath: "005-gpu-operator/values.yaml", wantParts: []string{"missing", "values.yaml and cluster-values.yaml"}},
		{name: "missing cluster-values.yaml",
			edit:     func(t *testing.T, d string) { remove(t, d, "001-cert-manager/cluster-values.yaml") },
			wantPath: "001-cert-manager/cluster-values.yaml", wantParts: []string{"missing"}},
		{name: "values.yaml is not a mapping",
			edit:     func(t *testing.T, d string) { write(t, d, "007-network-operator/values.yaml", "- a\n- b\n") },
			wantPath: "007-network-operator/values.yaml", wantParts: []string{"a mapping of Helm values is accepted, not a list"}},
		{name: "a folder without a chart or upstream.env",
			edit:     func(t *testing.T, d string) { remove(t, d, "008-nvsentinel/upstream.env") },
			wantPath: "008-nvsentinel", wantParts: []string{"neither Chart.yaml nor upstream.env", "a local chart (Chart.yaml and templates/)", "CHART, REPO, VERSION"}},
		{name: "upstream.env without VERSION",
			edit:     func(t *testing.T, d string) { write(t, d, "001-cert-manager/upstream.env", "CHART='cert-manager'\n") },
			wantPath: "001-cert-manager/upstream.env", wantParts: []string{"CHART and VERSION are required"}},
		{name: "a cycle in dependencyRefs", recipe: true,
			edit: func(t *testing.T, d string) {
				replace(t, d, "recipe.yaml", "valuesFile: components/cert-manager/values.yaml", "valuesFile: components/cert-manager/values.yaml\n    dependencyRefs: [nvsentinel]")
			},
			wantPath: "recipe.yaml", wantParts: []string{"componentRefs[0].dependencyRefs", "dependency cycle cert-manager -> nvsentinel -> cert-manager", "directed acyclic graph"}},
		{name: "an unknown dependency", recipe: true,
			edit: func(t *testing.T, d string) {
				replace(t, d, "recipe.yaml", "dependencyRefs: [nodewright-operator]", "dependencyRefs: [nodewright-operatr]")
			},
			wantPath: "recipe.yaml", wantParts: []string{"componentRefs[3].dependencyRefs[0]", `unknown dependency "nodewright-operatr"`, "cert-manager, kube-prometheus-stack, nodewright-operator"}},
		{name: "a folder the recipe does not name", recipe: true,
			edit: func(t *testing.T, d string) {
				rename(t, d, "007-network-operator", "007-net-operator")
				replace(t, d, BundleInfoFile, "path: 007-network-operator", "path: 007-net-operator")
			},
			wantPath: "007-net-operator", wantParts: []string{"not in", "componentRefs"}},
		{name: "the recipe's chart version differs from upstream.env", recipe: true,
			edit:     func(t *testing.T, d string) { replace(t, d, "recipe.yaml", "version: v26.7.0", "version: v26.3.0") },
			wantPath: "005-gpu-operator/upstream.env", wantParts: []string{`VERSION "v26.7.0"`, `componentRefs[4].version is "v26.3.0"`}},
		{name: "folders out of deploymentOrder", recipe: true,
			edit: func(t *testing.T, d string) {
				replace(t, d, "recipe.yaml", "  - kube-prometheus-stack\n  - nodewright-operator\n", "  - nodewright-operator\n  - kube-prometheus-stack\n")
			},
			wantPath: "003-nodewright-operator", wantParts: []string{"deploymentOrder"}},
		{name: "a folder bundle-info.yaml does not list",
			edit: func(t *testing.T, d string) {
				replace(t, d, BundleInfoFile, "    - {name: nvsentinel, component: nvsentinel, namespace: nvsentinel, path: 008-nvsentinel}\n", "")
			},
			wantPath: "008-nvsentinel", wantParts: []string{"not listed in bundle-info.yaml layout.releases"}},
		{name: "bundle-info.yaml of another kind",
			edit:     func(t *testing.T, d string) { replace(t, d, BundleInfoFile, "kind: BundleInfo", "kind: Bundle") },
			wantPath: BundleInfoFile, wantParts: []string{"kind BundleInfo, apiVersion aicr.run/v1 is accepted"}},
		{name: "no bundle-info.yaml",
			edit:     func(t *testing.T, d string) { remove(t, d, BundleInfoFile) },
			wantPath: BundleInfoFile, wantParts: []string{"missing", "kind BundleInfo"}},
		{name: "a file changed after aicr bundle wrote it", keepSums: true,
			edit: func(t *testing.T, d string) {
				write(t, d, "005-gpu-operator/cluster-values.yaml", "driver: {version: \"1.0\"}\n")
			},
			wantPath: "005-gpu-operator/cluster-values.yaml", wantParts: []string{"checksum mismatch", "checksums.txt says"}},
		{name: "two folders with one number",
			edit: func(t *testing.T, d string) {
				rename(t, d, "008-nvsentinel", "007-nvsentinel")
				replace(t, d, BundleInfoFile, "path: 008-nvsentinel", "path: 007-nvsentinel")
			},
			wantPath: "007-", wantParts: []string{"folder number 007 is also used by"}},
		{name: "a release name the operator refuses",
			edit:     func(t *testing.T, d string) { rename(t, d, "008-nvsentinel", "008-NVSentinel") },
			wantPath: "008-NVSentinel", wantParts: []string{"lowercase DNS-1123 label of at most 53 characters"}},
		{name: "a namespace the operator refuses",
			edit: func(t *testing.T, d string) {
				replace(t, d, BundleInfoFile, "namespace: nvsentinel,", "namespace: Bad_NS,")
			},
			wantPath: "008-nvsentinel", wantParts: []string{"components[7].namespace", "DNS-1123 label"}},
		{name: "a namespace reserved for the cluster",
			edit: func(t *testing.T, d string) {
				replace(t, d, BundleInfoFile, "namespace: nvsentinel,", "namespace: kube-system,")
			},
			wantPath: "008-nvsentinel", wantParts: []string{"components[7].namespace", `namespace "kube-system" is not allowed`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyBundle(t, exampleDir(t))
			if !tt.keepSums {
				remove(t, dir, ChecksumsFile)
			}
			tt.edit(t, dir)
			reg := newFakeRegistry()
			err := importDir(t, dir, tt.recipe, reg)
			if len(reg.pushes) > 0 {
				t.Errorf("a refused bundle pushed %v; nothing is pushed before the whole folder is checked", reg.pushes)
			}
			if err == nil {
				t.Fatal("the import succeeded; want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, filepath.Join(dir, tt.wantPath)) {
				t.Errorf("error %q does not name %s", msg, filepath.Join(dir, tt.wantPath))
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(msg, p) {
					t.Errorf("error %q does not say %q", msg, p)
				}
			}
		})
	}
}

// importDir reads and imports dir into reg (with every upstream chart
// mirrored from the example's stand-ins), as the command does.
func importDir(t *testing.T, dir string, withRecipe bool, reg Registry) error {
	t.Helper()
	l, err := Read(dir)
	if err != nil {
		return err
	}
	var r *Recipe
	if withRecipe {
		p := filepath.Join(dir, "recipe.yaml")
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if r, err = ParseRecipe(p, raw); err != nil {
			return err
		}
	}
	_, err = Import(t.Context(), l, reg, Options{Recipe: r, Repository: testRepo, MirrorFrom: mirrorDir(t)})
	return err
}

func remove(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, dir, from, to string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		t.Fatal(err)
	}
}

func replace(t *testing.T, dir, rel, from, to string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), from) {
		t.Fatalf("%s does not hold %q", rel, from)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(raw), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
