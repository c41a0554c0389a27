package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Pinned versions of what the walk-through installs.
const (
	// ArgoCDChartVersion is the Argo Helm chart of Argo CD v3.4.2.
	ArgoCDChartVersion = "9.5.14"
	// RegistryImage is the OCI registry (the local stack builds the same distribution v3).
	RegistryImage = "registry:3"
	// ComposeProject is the docker-compose project name.
	ComposeProject = "aicr-operator"
)

// command is one program the walk-through runs.
type command struct {
	name  string
	args  []string
	env   []string // added to the environment
	stdin string
}

func (c command) String() string {
	var env string
	for _, e := range c.env {
		k, _, _ := strings.Cut(e, "=")
		if strings.Contains(strings.ToUpper(k), "PASSWORD") {
			e = k + "=<redacted>"
		}
		env += e + " "
	}
	return env + c.name + " " + strings.Join(c.args, " ")
}

// runner runs commands; the walk-through's Docker-free parts (everything it generates) do not go
// through it, so a dry run (or a test) exercises them for real.
type runner interface {
	run(ctx context.Context, c command) (stdout string, err error)
}

// execRunner runs the commands, showing their output as it comes.
type execRunner struct{ root string }

func (r execRunner) run(ctx context.Context, c command) (string, error) {
	fmt.Printf("compose-demo: + %s\n", c)
	cmd := exec.CommandContext(ctx, c.name, c.args...)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), c.env...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stdout)
	cmd.Stderr = os.Stderr
	if c.stdin != "" {
		cmd.Stdin = strings.NewReader(c.stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w", c.name, err)
	}
	return out.String(), nil
}

// dryRunner prints each command and answers as the real one would where a later step reads the
// output (a placeholder digest for helm push).
type dryRunner struct{ w io.Writer }

func (r dryRunner) run(_ context.Context, c command) (string, error) {
	fmt.Fprintf(r.w, "compose-demo: + %s\n", c)
	if c.name == "helm" && len(c.args) > 0 && c.args[0] == "push" {
		return "Digest: sha256:" + strings.Repeat("0", 64) + "\n", nil
	}
	return "", nil
}

// demo is one walk-through: the steps of the no-Docker demo (make demo), with Docker.
type demo struct {
	cfg     Config
	root    string // the repository
	work    string // generated files (deploy/compose/.demo)
	timeout time.Duration
	r       runner
	out     io.Writer
	digests map[string]string
}

// step is one stage, named in the output.
type step struct {
	name string
	do   func(ctx context.Context) error
}

func (d *demo) steps() []step {
	return []step{
		{"build the operator's images and the example workload's", d.images},
		{"create the kind cluster " + d.cfg.Cluster, d.cluster},
		{"install Argo CD v3.4.2 (Argo Helm chart " + ArgoCDChartVersion + ")", d.argoCD},
		{"start the registry container " + d.cfg.RegistryName + " on the kind network", d.registry},
		{"push the example charts", d.pushCharts},
		{"create the CRDs, namespaces and AppProject the chart renders", d.clusterObjects},
		{"create the repo-creds Secret, the repository Secrets and the bundle", d.secretsAndBundle},
		{"start NATS and the five binaries with docker-compose", d.compose},
		{"build kubectl-aicr", d.plugin},
		{"apply the ClusterRuntime and wait for Ready", d.rollout},
	}
}

// Run runs every step in order and stops at the first failure, naming it.
func (d *demo) Run(ctx context.Context) error {
	if err := os.MkdirAll(d.work, 0o700); err != nil {
		return err
	}
	for i, s := range d.steps() {
		fmt.Fprintf(d.out, "compose-demo: %d/%d %s\n", i+1, len(d.steps()), s.name)
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.name, err)
		}
	}
	return nil
}

func (d *demo) sh(ctx context.Context, name string, args ...string) (string, error) {
	return d.r.run(ctx, command{name: name, args: args})
}

func (d *demo) images(ctx context.Context) error {
	if _, err := d.r.run(ctx, command{name: "make", args: []string{"images-load"}, env: []string{"IMAGE_REPOSITORY=aicr-operator", "IMAGE_TAG=dev"}}); err != nil {
		return err
	}
	// No build context: the image copies nothing, and deploy/compose holds the demo's secrets.
	dockerfile, err := os.ReadFile(filepath.Join(d.root, "deploy", "compose", "demo-workload.Dockerfile"))
	if err != nil {
		return err
	}
	_, err = d.r.run(ctx, command{name: "docker", args: []string{"build", "-t", WorkloadImage + ":" + WorkloadTag, "-"}, stdin: string(dockerfile)})
	return err
}

// hostKubeconfig is the kubeconfig the walk-through's kubectl and helm use (kind's, from the host).
func (d *demo) hostKubeconfig() string { return filepath.Join(d.work, "kubeconfig") }

func (d *demo) kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	return d.r.run(ctx, command{name: "kubectl", args: append([]string{"--kubeconfig", d.hostKubeconfig()}, args...), stdin: stdin})
}

func (d *demo) cluster(ctx context.Context) error {
	out, err := d.sh(ctx, "kind", "get", "clusters")
	if err != nil {
		return err
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(d.cfg.Cluster) + `$`).MatchString(out) {
		if _, err := d.sh(ctx, "kind", "create", "cluster", "--name", d.cfg.Cluster, "--wait", "2m"); err != nil {
			return err
		}
	}
	for _, kc := range []struct {
		internal bool
		path     string
	}{{false, d.hostKubeconfig()}, {true, filepath.Join(d.root, "deploy", "compose", "kubeconfig")}} {
		args := []string{"get", "kubeconfig", "--name", d.cfg.Cluster}
		if kc.internal { // the binaries reach the API server from inside kind's network
			args = append(args, "--internal")
		}
		out, err := d.sh(ctx, "kind", args...)
		if err != nil {
			return err
		}
		if out == "" {
			continue // a dry run: leave any kubeconfig there is
		}
		if err := os.WriteFile(kc.path, []byte(out), 0o600); err != nil {
			return err
		}
	}
	_, err = d.sh(ctx, "kind", "load", "docker-image", WorkloadImage+":"+WorkloadTag, "--name", d.cfg.Cluster)
	return err
}

func (d *demo) argoCD(ctx context.Context) error {
	if _, err := d.sh(ctx, "helm", "repo", "add", "argo", "https://argoproj.github.io/argo-helm", "--force-update"); err != nil {
		return err
	}
	_, err := d.sh(ctx, "helm", "--kubeconfig", d.hostKubeconfig(), "upgrade", "--install", "argocd", "argo/argo-cd",
		"--version", ArgoCDChartVersion, "-n", stack.EngineNamespace, "--create-namespace", "--wait", "--timeout", "10m")
	return err
}

func (d *demo) registry(ctx context.Context) error {
	auth := filepath.Join(d.work, "registry-auth")
	if err := os.MkdirAll(auth, 0o700); err != nil {
		return err
	}
	line, err := Htpasswd(d.cfg.RegistryUser, d.cfg.RegistryPassword)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(auth, "htpasswd"), line, 0o644); err != nil {
		return err
	}
	_, _ = d.sh(ctx, "docker", "rm", "-f", d.cfg.RegistryName) // a previous run's
	_, err = d.sh(ctx, "docker", "run", "-d", "--name", d.cfg.RegistryName, "--network", "kind", "--restart", "unless-stopped",
		"-p", fmt.Sprintf("127.0.0.1:%d:5000", d.cfg.RegistryPort), "-v", auth+":/auth:ro",
		"-e", "REGISTRY_AUTH=htpasswd", "-e", "REGISTRY_AUTH_HTPASSWD_REALM=aicr-compose-demo", "-e", "REGISTRY_AUTH_HTPASSWD_PATH=/auth/htpasswd",
		RegistryImage)
	return err
}

// digestLine is how helm push reports the manifest digest.
var digestLine = regexp.MustCompile(`(?m)^Digest:\s+(sha256:[0-9a-f]{64})\s*$`)

func (d *demo) pushCharts(ctx context.Context) error {
	if _, err := d.r.run(ctx, command{name: "helm", args: []string{"registry", "login", d.cfg.PushHost(), "--insecure",
		"--username", d.cfg.RegistryUser, "--password-stdin"}, stdin: d.cfg.RegistryPassword}); err != nil {
		return err
	}
	pkgs := filepath.Join(d.work, "charts")
	if err := os.MkdirAll(pkgs, 0o700); err != nil {
		return err
	}
	d.digests = map[string]string{}
	for _, c := range Components() {
		if _, err := d.sh(ctx, "helm", "package", filepath.Join("examples", "charts", c.Dir, c.Name), "--destination", pkgs); err != nil {
			return err
		}
		tgz, err := filepath.Glob(filepath.Join(pkgs, c.Name+"-*.tgz"))
		if err != nil || len(tgz) == 0 {
			tgz = []string{filepath.Join(pkgs, c.Name+".tgz")} // a dry run packages nothing
		}
		out, err := d.sh(ctx, "helm", "push", tgz[0], "oci://"+d.cfg.PushHost()+"/"+stack.RepositoryPath+"/"+c.Dir, "--plain-http")
		if err != nil {
			return err
		}
		m := digestLine.FindStringSubmatch(out)
		if m == nil {
			return fmt.Errorf("helm push %s printed no digest:\n%s", c.Name, out)
		}
		d.digests[c.Name] = m[1]
	}
	return nil
}

func (d *demo) clusterObjects(ctx context.Context) error {
	if _, err := d.kubectl(ctx, "", "apply", "--server-side", "-f", filepath.Join("shared", "api", "crds")); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+stack.OperatorNamespace+"}\n", "apply", "-f", "-"); err != nil {
		return err
	}
	engine, err := d.sh(ctx, "helm", "template", v1alpha1.ReleaseName, filepath.Join("deploy", "charts", "aicr-operator"), "-n", stack.OperatorNamespace,
		"--set", "registry.repository="+d.cfg.Repository(), "--set", "engine.namespace="+stack.EngineNamespace, "--show-only", "templates/engine.yaml")
	if err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, engine, "apply", "-f", "-"); err != nil {
		return err
	}
	// kind's node plays the GPU node, as kwok's does in the local stack.
	_, err = d.kubectl(ctx, "", "label", "node", d.cfg.Cluster+"-control-plane", stack.GPUNodeLabel+"=true", "--overwrite")
	return err
}

func (d *demo) secretsAndBundle(ctx context.Context) error {
	m, err := d.cfg.Manifests(d.digests)
	if err != nil {
		return err
	}
	path := filepath.Join(d.work, "manifests.yaml")
	if err := os.WriteFile(path, m, 0o600); err != nil {
		return err
	}
	_, err = d.kubectl(ctx, "", "apply", "-f", path)
	return err
}

// ComposeEnv is docker-compose's environment: the registry repository the binaries write into
// every Application, and the kubeconfig that works from inside kind's network.
func (d *demo) composeEnv() []string {
	return []string{"AICR_REGISTRY_REPOSITORY=" + d.cfg.Repository(), "AICR_KUBECONFIG=" + filepath.Join(d.root, "deploy", "compose", "kubeconfig")}
}

func (d *demo) compose(ctx context.Context) error {
	_, err := d.r.run(ctx, command{name: "docker-compose", env: d.composeEnv(),
		args: []string{"-p", ComposeProject, "-f", filepath.Join("deploy", "compose", "docker-compose.yaml"), "up", "-d"}})
	return err
}

func (d *demo) plugin(ctx context.Context) error {
	_, err := d.sh(ctx, "go", "build", "-o", filepath.Join("bin", "kubectl-aicr"), "./cli/cmd/kubectl-aicr")
	return err
}

func (d *demo) rollout(ctx context.Context) error {
	rt, err := Runtime()
	if err != nil {
		return err
	}
	path := filepath.Join(d.work, "clusterruntime.yaml")
	if err := os.WriteFile(path, rt, 0o600); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, "", "apply", "-f", path); err != nil {
		return err
	}
	waitErr := func() error {
		_, err := d.kubectl(ctx, "", "wait", "clusterruntime/"+v1alpha1.RuntimeName, "--for=condition=Ready", "--timeout="+d.timeout.String())
		return err
	}()
	// Whatever the wait said, show where the rollout is.
	_, _ = d.r.run(ctx, command{name: filepath.Join("bin", "kubectl-aicr"), args: []string{"--kubeconfig", d.hostKubeconfig(), "status"}})
	return waitErr
}

// down stops and removes what Run started.
func (d *demo) down(ctx context.Context) error {
	var errs []string
	for _, c := range []command{
		{name: "docker-compose", env: d.composeEnv(), args: []string{"-p", ComposeProject, "-f", filepath.Join("deploy", "compose", "docker-compose.yaml"), "down", "-v"}},
		{name: "docker", args: []string{"rm", "-f", d.cfg.RegistryName}},
		{name: "kind", args: []string{"delete", "cluster", "--name", d.cfg.Cluster}},
	} {
		if _, err := d.r.run(ctx, c); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// registryPassword is the registry's password: kept in the work folder, so a second run (the
// cluster and its Secrets still there) uses the same one.
func registryPassword(work string) (string, error) {
	path := filepath.Join(work, "registry-password")
	if raw, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(raw)) > 0 {
		return string(bytes.TrimSpace(raw)), nil
	}
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	pw := hex.EncodeToString(b)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", err
	}
	return pw, os.WriteFile(path, []byte(pw), 0o600)
}
