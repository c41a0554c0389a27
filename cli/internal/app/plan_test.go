package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/preview"
)

var previewInputs = preview.Inputs

func examples(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "examples", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// noCluster is an Env for commands that must not need a cluster.
func noCluster(stdout, stderr *bytes.Buffer) Env {
	return Env{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
	}
}

// runNoCluster runs the plugin with a kubeconfig that does not exist: a command that tried to
// reach a cluster would fail.
func runNoCluster(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(args, "--kubeconfig", filepath.Join(t.TempDir(), "no-kubeconfig"))
	code := Main(context.Background(), args, noCluster(&stdout, &stderr))
	return code, stdout.String(), stderr.String()
}

func resolveFile(t *testing.T, bundle, runtime string) *plan.Plan {
	t.Helper()
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := plan.ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	var in plan.Inputs
	if runtime != "" {
		data, err := os.ReadFile(runtime)
		if err != nil {
			t.Fatal(err)
		}
		if in, err = previewInputs(data); err != nil {
			t.Fatal(err)
		}
	}
	p, err := plan.Resolve(pb, in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// plan --bundle prints, without a cluster, the digest the planner would compute and the steps.
func TestPlanWithoutCluster(t *testing.T) {
	bundle, runtime := examples(t, "bundle.yaml"), examples(t, "clusterruntime.yaml")
	dir := t.TempDir()
	// An earlier bundle: without dcgm-exporter, and an older gpu-operator driver.
	orig, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	earlier := strings.Replace(string(orig), `version: "580.95.05"`, `version: "570.10.01"`, 1)
	earlier = earlier[:strings.Index(earlier, "  # A wrapper chart")] + earlier[strings.Index(earlier, "  # Training:"):]
	earlier = strings.Replace(earlier, "dependsOn: [jobset, gpu-operator-readiness]", "dependsOn: [jobset]", 1)
	from := filepath.Join(dir, "earlier.yaml")
	if err := os.WriteFile(from, []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}

	type step struct{ Release, Action string }
	for name, tc := range map[string]struct {
		args      []string
		wantPlan  *plan.Plan
		wantSteps []step
	}{
		"from nothing every release is installed in dependency order": {
			args:     []string{"plan", "--bundle", bundle, "-o", "json"},
			wantPlan: resolveFile(t, bundle, ""),
			wantSteps: []step{
				{"cert-manager", "Install"}, {"kube-prometheus-stack", "Install"}, {"nfd", "Install"}, {"nodewright-customizations", "Install"},
				{"gpu-operator", "Install"}, {"jobset", "Install"}, {"gpu-operator-readiness", "Install"},
				{"dcgm-exporter", "Install"}, {"kubeflow-trainer", "Install"},
			},
		},
		"the runtime's overrides and placement change the digest the planner computes": {
			args:     []string{"plan", "--bundle", bundle, "--runtime", runtime, "-o", "json"},
			wantPlan: resolveFile(t, bundle, runtime),
			wantSteps: []step{
				{"cert-manager", "Install"}, {"kube-prometheus-stack", "Install"}, {"nfd", "Install"}, {"nodewright-customizations", "Install"},
				{"gpu-operator", "Install"}, {"jobset", "Install"}, {"gpu-operator-readiness", "Install"},
				{"dcgm-exporter", "Install"}, {"kubeflow-trainer", "Install"},
			},
		},
		"from an earlier bundle only what changed moves, and the gate re-checks it": {
			args:     []string{"plan", "--bundle", bundle, "--from", from, "-o", "json"},
			wantPlan: resolveFile(t, bundle, ""),
			wantSteps: []step{
				{"gpu-operator", "Upgrade"}, {"gpu-operator-readiness", "Apply"}, {"dcgm-exporter", "Install"}, {"kubeflow-trainer", "Apply"},
			},
		},
		"back to the earlier bundle removes the release that left, with approval": {
			args:     []string{"plan", "--bundle", from, "--from", bundle, "-o", "json"},
			wantPlan: resolveFile(t, from, ""),
			wantSteps: []step{
				{"gpu-operator", "Upgrade"}, {"gpu-operator-readiness", "Apply"}, {"kubeflow-trainer", "Apply"}, {"dcgm-exporter", "Remove"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runNoCluster(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got struct {
				Digest string
				Steps  []step
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			if got.Digest != tc.wantPlan.Digest() {
				t.Errorf("digest %s, want %s", got.Digest, tc.wantPlan.Digest())
			}
			if diff := cmp.Diff(tc.wantSteps, got.Steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// plan --applications prints the Applications appspec.Build renders, the builder the applier
// uses, with the installation values given.
func TestPlanApplicationsAreTheAppliersApplications(t *testing.T) {
	bundle, runtime := examples(t, "bundle.yaml"), examples(t, "clusterruntime.yaml")
	code, stdout, stderr := runNoCluster(t, "plan", "--bundle", bundle, "--runtime", runtime, "--applications", "-o", "json",
		"--registry-repository", "reg.example.com/aicr", "--engine-namespace", "gitops", "--engine-project", "gpu", "--runtime-uid", "uid-7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Applications []map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	p := resolveFile(t, bundle, runtime)
	if len(got.Applications) != len(p.Releases) {
		t.Fatalf("%d applications, want one per release (%d)", len(got.Applications), len(p.Releases))
	}
	for i := range p.Releases {
		want, err := appspec.Build(appspec.Settings{EngineNamespace: "gitops", Project: "gpu", Repository: "reg.example.com/aicr"},
			appspec.Input{Runtime: "cluster", RuntimeUID: "uid-7", PlanDigest: p.Digest(), Release: &p.Releases[i]})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(want)
		var wantObj map[string]any
		if err := json.Unmarshal(raw, &wantObj); err != nil {
			t.Fatal(err)
		}
		delete(wantObj, "status")
		delete(wantObj["metadata"].(map[string]any), "creationTimestamp")
		if diff := cmp.Diff(wantObj, got.Applications[i]); diff != "" {
			t.Errorf("application %s (-appspec.Build +plan --applications):\n%s", p.Releases[i].Name, diff)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: x, version: '1'}\ncomponents:\n- name: a\n  chart: {path: charts/a, digest: sha256:abc}\n  namespace: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		want     string
	}{
		"no bundle is a usage error":            {[]string{"plan"}, 2, "--bundle is required"},
		"a bad digest names the field":          {[]string{"plan", "--bundle", bad}, 1, "--bundle: components[0].chart.digest"},
		"an unknown output format is refused":   {[]string{"plan", "--bundle", bad, "-o", "xml"}, 1, `-o "xml": use one of text, json, yaml, name, dot, mermaid, jsonpath=...`},
		"a missing file is named":               {[]string{"plan", "--bundle", "/nonexistent.yaml"}, 1, "--bundle: open /nonexistent.yaml"},
		"a bad repository is named":             {[]string{"plan", "--bundle", examples(t, "bundle.yaml"), "--applications", "--registry-repository", "https://x/"}, 1, "registry repository"},
		"an unknown command lists the commands": {[]string{"deploy"}, 2, `unknown command "deploy"`},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runNoCluster(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.wantCode, tc.want)
			}
			if stdout != "" {
				t.Errorf("an error printed on stdout: %q", stdout)
			}
		})
	}
}

// plan prints in every format: the result as data, its names, templates over it, and the graph
// as text, dot or mermaid.
func TestPlanOutputFormats(t *testing.T) {
	bundle := examples(t, "bundle.yaml")
	p := resolveFile(t, bundle, "")
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"text":                    {nil, []string{"plan " + p.Digest(), "9 steps:", "5  gpu-operator               Install"}},
		"yaml":                    {[]string{"-o", "yaml"}, []string{"digest: " + p.Digest(), "- action: Install"}},
		"name":                    {[]string{"-o", "name", "--applications"}, []string{"configmap/" + plan.ConfigMapName(p.Digest()) + "\n", "application.argoproj.io/gpu-operator\n"}},
		"jsonpath":                {[]string{"-o", "jsonpath={.steps[4].release}"}, []string{"gpu-operator"}},
		"go-template":             {[]string{"-o", "go-template={{range .steps}}{{.index}}:{{.release}} {{end}}"}, []string{"1:cert-manager 2:kube-prometheus-stack"}},
		"graph text":              {[]string{"--graph"}, []string{": 0/9 steps succeeded", "2 ┬ ○ gpu-operator", "← jobset, gpu-operator-readiness"}},
		"graph json":              {[]string{"--graph", "-o", "json"}, []string{`"name": "gpu-operator"`, `"layer": 1`, `"from": "gpu-operator-readiness"`}},
		"dot draws the graph":     {[]string{"-o", "dot"}, []string{"digraph rollout {", `"gpu-operator" -> "gpu-operator-readiness";`}},
		"mermaid draws the graph": {[]string{"-o", "mermaid"}, []string{"flowchart LR", "n4 --> n6"}},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runNoCluster(t, append([]string{"plan", "--bundle", bundle}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}
