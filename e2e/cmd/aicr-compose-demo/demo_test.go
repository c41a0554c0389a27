package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

var testConfig = Config{Cluster: "aicr", RegistryName: "aicr-registry", RegistryPort: 5001, RegistryUser: "aicr", RegistryPassword: "s3cret-for-the-test"}

// digests are distinct per chart, as the registry reports them.
func digests() map[string]string {
	out := map[string]string{}
	for i, c := range stack.ExampleComponents() {
		out[c.Name] = fmt.Sprintf("sha256:%064x", i+1)
	}
	return out
}

func decodeAll(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return out
			}
			t.Fatal(err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

// The bundle carries each pushed chart's digest and runs every pod on the demo workload, and
// resolves into a plan whose every chart is one the walk-through pushed.
func TestBundleResolvesWithThePushedDigests(t *testing.T) {
	raw, err := Bundle(digests())
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.ParseBundle(raw)
	if err != nil {
		t.Fatalf("the generated bundle does not parse: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{Placement: RuntimeSpec().Placement})
	if err != nil {
		t.Fatalf("the generated bundle does not resolve with the demo's placement: %v", err)
	}
	if len(p.Releases) != len(stack.ExampleComponents()) {
		t.Fatalf("%d releases, want one per example component", len(p.Releases))
	}
	for _, c := range b.Components {
		if c.Chart.Digest != digests()[c.Name] {
			t.Errorf("%s: digest %s, want the pushed %s", c.Name, c.Chart.Digest, digests()[c.Name])
		}
		var values struct {
			Image struct{ Repository, Tag string } `json:"image"`
		}
		if err := json.Unmarshal(c.Values, &values); err != nil || values.Image.Repository != WorkloadImage || values.Image.Tag != WorkloadTag {
			t.Errorf("%s: image %+v (%v), want %s:%s", c.Name, values.Image, err, WorkloadImage, WorkloadTag)
		}
	}
	if _, err := Bundle(map[string]string{}); err == nil {
		t.Error("a bundle without the pushed digests rendered")
	}
}

// The Secrets are the ones the local stack creates: repo-creds for the operator's repository
// (what credrefresher checks and Argo CD pulls with), one repository Secret per chart at the URL
// the Applications name, plain HTTP, the registry's credentials; the bundle ConfigMap is what the
// runtime points at.
func TestManifestsAreTheStacks(t *testing.T) {
	raw, err := testConfig.Manifests(digests())
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, raw)
	secrets := map[string]corev1.Secret{}
	var cm corev1.ConfigMap
	for _, o := range objs {
		js, _ := json.Marshal(o)
		switch o["kind"] {
		case "Secret":
			var s corev1.Secret
			if err := json.Unmarshal(js, &s); err != nil {
				t.Fatal(err)
			}
			secrets[s.Name] = s
		case "ConfigMap":
			if err := json.Unmarshal(js, &cm); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected %v", o["kind"])
		}
	}
	rc, ok := secrets[stack.RepoCredsSecret]
	if !ok || rc.Namespace != stack.EngineNamespace || rc.Labels[v1alpha1.LabelArgoSecretType] != v1alpha1.ArgoSecretTypeRepoCreds {
		t.Fatalf("repo-creds Secret %+v", rc.ObjectMeta)
	}
	want := map[string]string{"type": "oci", "url": "oci://aicr-registry:5000/aicr", "insecureOCIForceHttp": "true", "username": "aicr", "password": "s3cret-for-the-test"}
	if fmt.Sprint(rc.StringData) != fmt.Sprint(want) {
		t.Errorf("repo-creds data %v, want %v", rc.StringData, want)
	}
	for _, c := range stack.ExampleComponents() {
		s, ok := secrets["aicr-repo-"+c.Name]
		if !ok || s.Labels[v1alpha1.LabelArgoSecretType] != "repository" || s.StringData["url"] != "oci://aicr-registry:5000/aicr/"+c.Dir+"/"+c.Name ||
			s.StringData["insecureOCIForceHttp"] != "true" || s.StringData["password"] != testConfig.RegistryPassword {
			t.Errorf("repository Secret of %s: %+v %v", c.Name, s.ObjectMeta, s.StringData)
		}
	}
	spec := RuntimeSpec()
	if cm.Name != spec.Bundle.ConfigMap.Name || cm.Namespace != spec.Bundle.ConfigMap.Namespace || cm.Data[spec.Bundle.ConfigMap.Key] == "" {
		t.Errorf("bundle ConfigMap %s/%s keys %v; the runtime reads %+v", cm.Namespace, cm.Name, cm.Data, spec.Bundle.ConfigMap)
	}
	rt, err := Runtime()
	if err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.ClusterRuntime
	if err := yaml.Unmarshal(rt, &got); err != nil || got.Name != v1alpha1.RuntimeName || got.Kind != "ClusterRuntime" ||
		got.Spec.Placement.Accelerated.NodeSelector[stack.GPUNodeLabel] != "true" {
		t.Errorf("ClusterRuntime %s %+v (%v)", got.Kind, got.Spec, err)
	}
	line, err := Htpasswd("aicr", "pw")
	if err != nil {
		t.Fatal(err)
	}
	user, hash, _ := strings.Cut(strings.TrimSpace(string(line)), ":")
	if user != "aicr" || bcrypt.CompareHashAndPassword([]byte(hash), []byte("pw")) != nil {
		t.Errorf("htpasswd line %q does not hold the password", line)
	}
}

// recorder is the runner of the test: it records each command and answers as the tools would.
type recorder struct {
	cmds []command
	push int
}

func (r *recorder) run(_ context.Context, c command) (string, error) {
	r.cmds = append(r.cmds, c)
	switch {
	case c.name == "helm" && c.args[0] == "push":
		r.push++
		return fmt.Sprintf("Pushed: x\nDigest: sha256:%064x\n", r.push), nil
	case c.name == "kind" && slices.Equal(c.args[:2], []string{"get", "kubeconfig"}):
		return "apiVersion: v1\nkind: Config\n# " + strings.Join(c.args, " ") + "\n", nil
	case c.name == "helm" && c.args[0] == "template":
		return "kind: AppProject\n", nil
	}
	return "", nil
}

// The walk-through takes the no-Docker demo's steps, in its order, and what one step learns
// reaches the next: the pushed digests go into the bundle it applies, the internal kubeconfig
// into docker-compose, the repository docker-compose is given is the one the Secrets are for,
// and it ends waiting for Ready.
func TestWalkThroughTakesTheDemosSteps(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "deploy", "compose"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "deploy", "compose", "demo-workload.Dockerfile"), []byte("FROM busybox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	d := &demo{cfg: testConfig, root: root, work: filepath.Join(root, "deploy", "compose", ".demo"), timeout: time.Minute, r: r, out: io.Discard}
	if err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, c := range r.cmds {
		word := c.name
		if len(c.args) > 0 {
			word += " " + c.args[0]
			if c.name == "kubectl" && len(c.args) > 2 {
				word = "kubectl " + c.args[2]
			}
		}
		if len(seq) == 0 || seq[len(seq)-1] != word {
			seq = append(seq, word)
		}
	}
	want := []string{"make images-load", "docker build", "kind get", "kind create", "kind get", "kind load", "helm repo", "helm --kubeconfig",
		"docker rm", "docker run", "helm registry", "helm package", "helm push", "helm package", "helm push"}
	if got := strings.Join(seq[:len(want)], ", "); got != strings.Join(want, ", ") {
		t.Errorf("the walk-through begins\n  %s\nwant\n  %s", got, strings.Join(want, ", "))
	}
	tail := []string{"kubectl apply", "helm template", "kubectl apply", "kubectl label", "kubectl apply", "docker-compose -p", "go build", "kubectl apply", "kubectl wait", "bin/kubectl-aicr --kubeconfig"}
	if got := strings.Join(seq[len(seq)-len(tail):], ", "); got != strings.Join(tail, ", ") {
		t.Errorf("the walk-through ends\n  %s\nwant\n  %s", got, strings.Join(tail, ", "))
	}
	if r.push != len(stack.ExampleComponents()) {
		t.Errorf("%d charts pushed, want every example chart", r.push)
	}
	manifests, err := os.ReadFile(filepath.Join(d.work, "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range stack.ExampleComponents() {
		if !bytes.Contains(manifests, []byte(fmt.Sprintf("sha256:%064x", i+1))) {
			t.Errorf("the applied bundle lacks the digest helm push reported for chart %d", i+1)
		}
	}
	internal, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "kubeconfig"))
	if err != nil || !strings.Contains(string(internal), "--internal") {
		t.Errorf("docker-compose's kubeconfig %q (%v), want kind's internal one", internal, err)
	}
	for _, c := range r.cmds {
		if c.name != "docker-compose" {
			continue
		}
		if !slices.Contains(c.env, "AICR_REGISTRY_REPOSITORY=aicr-registry:5000/aicr") || !slices.Contains(c.env, "AICR_KUBECONFIG="+filepath.Join(root, "deploy", "compose", "kubeconfig")) {
			t.Errorf("docker-compose env %v", c.env)
		}
		if strings.Contains(c.String(), testConfig.RegistryPassword) {
			t.Error("a printed command shows the registry password")
		}
	}
	if build := r.cmds[1]; build.name != "docker" || build.args[len(build.args)-1] != "-" || build.stdin != "FROM busybox\n" {
		t.Errorf("the workload image is built with %s and stdin %q, want the Dockerfile on stdin and no context", build, build.stdin)
	}
	wait := r.cmds[len(r.cmds)-2]
	if !slices.Contains(wait.args, "--for=condition=Ready") || !slices.Contains(wait.args, "clusterruntime/"+v1alpha1.RuntimeName) {
		t.Errorf("the walk-through ends with %s, want a wait for Ready", wait)
	}
}

// The demo workload exits 0 at once when the readiness gate runs it with --checks (so the gate's
// Job completes) and otherwise sleeps (so the Deployments are Available).
func TestWorkloadEntrypoint(t *testing.T) {
	charts, err := stack.ChartsDir()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(charts)), "deploy", "compose", "demo-workload.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindSubmatch(raw)
	var entry []string
	if m == nil || json.Unmarshal(m[1], &entry) != nil || len(entry) < 3 {
		t.Fatalf("no JSON ENTRYPOINT in the Dockerfile")
	}
	if out, err := exec.Command("sh", append(entry[1:], "--checks", "/etc/checks/checks.yaml", "--target", "gpu-operator")...).CombinedOutput(); err != nil {
		t.Errorf("with --checks: %v %s", err, out)
	}
	// Without it the script sleeps; run with a sleep that returns at once, it exits 0 through it.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sleep"), []byte("#!/bin/sh\necho slept \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", entry[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "slept ") {
		t.Errorf("without --checks: %v %q, want it to sleep", err, out)
	}
}

// docker-compose accepts the environment the walk-through gives it: the registry repository and
// the internal kubeconfig, mounted into every binary.
func TestComposeTakesTheWalkThroughsEnvironment(t *testing.T) {
	dc := charttest.Tool(t, "docker-compose")
	root := charttest.RepoRoot(t)
	d := &demo{cfg: testConfig, root: root}
	kubeconfig := filepath.Join(root, "deploy", "compose", "kubeconfig")
	out, err := charttest.Run(t, root, d.composeEnv(), dc, "-f", filepath.Join(root, "deploy", "compose", "docker-compose.yaml"), "config")
	if err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	var cfg struct {
		Services map[string]struct {
			Command []string `json:"command"`
			Volumes []string `json:"volumes"` // docker-compose v1's short form, source:target:mode
		} `json:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, b := range v1alpha1.Binaries() {
		svc := cfg.Services[b]
		if b != v1alpha1.BinaryPlanner && b != v1alpha1.BinaryAdmission && !slices.Contains(svc.Command, "--registry-repository="+testConfig.Repository()) {
			t.Errorf("%s: command %v lacks the demo's registry repository", b, svc.Command)
		}
		if !slices.Contains(svc.Volumes, kubeconfig+":/etc/aicr/kubeconfig:ro") {
			t.Errorf("%s: volumes %v do not mount the internal kubeconfig %s", b, svc.Volumes, kubeconfig)
		}
	}
}
