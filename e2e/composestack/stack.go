package composestack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Names of the compose file (deploy/compose/docker-compose.yaml).
const (
	// Profile is the profile of the cluster container and Argo CD.
	Profile = "cluster"
	// Repository is where Argo CD and the binaries find the charts: the registry service.
	Repository = "registry:5000/" + stack.RepositoryPath
	// WebhookURL is where the API server calls the admission webhook (both replicas answer).
	WebhookURL = "https://admission:9443/validate"
	// RegistryUser is the registry's user (aicr-compose-node init).
	RegistryUser = "aicr"
)

// NATSNodes are the services of the NATS cluster.
var NATSNodes = []string{"nats-1", "nats-2", "nats-3"}

// Options configure Up.
type Options struct {
	// Project is docker-compose's project name (and the network's).
	Project string
	// Root is the repository root; BinDir holds kubectl-aicr.
	Root, BinDir string
	// Tools is the folder of helm and docker-compose (BuildImages returns it).
	Tools string
	// Log receives progress lines.
	Log io.Writer
}

// Stack is a running compose stack, attached (stack.Attach): charts pushed, cluster prepared,
// webhook registered.
type Stack struct {
	*stack.Stack
	// Kubeconfig is cluster-admin's kubeconfig for this machine (the published apiserver port).
	Kubeconfig string
	opts       Options
}

// Up starts the compose stack and prepares it for a ClusterRuntime. On error what started is
// left for Down (the returned Stack is nil then; call DownProject).
func Up(ctx context.Context, o Options) (*Stack, error) {
	start := time.Now()
	if err := compose(ctx, o, "up", "-d", "--no-build"); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "compose: containers started in %s\n", time.Since(start).Round(100*time.Millisecond))
	if err := waitHealthy(ctx, o, "cluster", 5*time.Minute); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "aicr-compose-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := hostKubeconfig(ctx, o, kubeconfig); err != nil {
		return nil, err
	}
	password, err := readFile(ctx, o, "registry", "/secrets/registry-password")
	if err != nil {
		return nil, err
	}
	ca, err := readFile(ctx, o, "registry", "/secrets/webhook-ca.crt")
	if err != nil {
		return nil, err
	}
	registryHost, err := publishedPort(ctx, o, "registry", 5000)
	if err != nil {
		return nil, err
	}
	env, err := testenv.Connect(testenv.ConnectOptions{Kubeconfig: kubeconfig, NodeName: testenv.KwokNodeName, ToolsDir: o.Tools,
		Registry: &testenv.Registry{Host: registryHost, Auth: &testenv.BasicAuth{Username: RegistryUser, Password: string(password)}}})
	if err != nil {
		return nil, err
	}
	if err := waitRegistry(ctx, registryHost); err != nil {
		return nil, err
	}
	s, err := stack.Attach(ctx, env, stack.AttachOptions{Repository: Repository, BinDir: o.BinDir, Log: o.Log})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	if err := s.RegisterWebhook(ctx, WebhookURL, ca); err != nil {
		_ = env.Stop()
		return nil, err
	}
	fmt.Fprintf(o.Log, "compose: stack up and prepared in %s (export KUBECONFIG=%s)\n", time.Since(start).Round(100*time.Millisecond), kubeconfig)
	return &Stack{Stack: s, Kubeconfig: kubeconfig, opts: o}, nil
}

// Down removes the stack: docker-compose down -v (every container, the network, the volumes),
// then checks that nothing of the project is left.
func (s *Stack) Down(ctx context.Context) error {
	errs := []error{DownProject(ctx, s.opts)}
	if s.Stack != nil {
		errs = append(errs, s.Stack.Down())
	}
	_ = os.RemoveAll(filepath.Dir(s.Kubeconfig))
	return errors.Join(errs...)
}

// DownProject is docker-compose down -v of the project, and the check that Docker holds no
// container, network or volume labelled with it afterwards.
func DownProject(ctx context.Context, o Options) error {
	if err := compose(ctx, o, "down", "-v", "--remove-orphans", "--timeout", "20"); err != nil {
		return err
	}
	left, err := Leftovers(ctx, o.Project)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("docker-compose down -v left %s", strings.Join(left, ", "))
	}
	return nil
}

// Leftovers lists the containers, networks and volumes Docker holds for project.
func Leftovers(ctx context.Context, project string) ([]string, error) {
	label := "label=com.docker.compose.project=" + project
	var left []string
	for _, kind := range [][]string{{"ps", "-a"}, {"network", "ls"}, {"volume", "ls"}} {
		out, err := exec.CommandContext(ctx, "docker", append(kind, "-q", "--filter", label)...).Output()
		if err != nil {
			return nil, fmt.Errorf("docker %s: %w", strings.Join(kind, " "), err)
		}
		for _, id := range strings.Fields(string(out)) {
			left = append(left, kind[0]+" "+id)
		}
	}
	return left, nil
}

// Compose runs docker-compose with the stack's project, file and profile.
func (s *Stack) Compose(ctx context.Context, args ...string) error {
	return compose(ctx, s.opts, args...)
}

// Container is the id of a service's container.
func (s *Stack) Container(ctx context.Context, service string) (string, error) {
	return container(ctx, s.opts, service)
}

// Network is the name of the stack's network.
func (s *Stack) Network() string { return s.opts.Project }

func composeFile(root string) string {
	return filepath.Join(root, "deploy", "compose", "docker-compose.yaml")
}

func compose(ctx context.Context, o Options, args ...string) error {
	_, err := composeOut(ctx, o, args...)
	return err
}

func composeOut(ctx context.Context, o Options, args ...string) (string, error) {
	full := append([]string{"-p", o.Project, "-f", composeFile(o.Root), "--profile", Profile}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(o.Tools, "docker-compose"), full...)
	cmd.Env = append(os.Environ(), "AICR_NETWORK="+o.Project)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker-compose %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return stdout.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func container(ctx context.Context, o Options, service string) (string, error) {
	out, err := composeOut(ctx, o, "ps", "-q", service)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		return "", fmt.Errorf("service %s: want one container, docker-compose ps says %q", service, id)
	}
	return id, nil
}

// waitHealthy waits until the service's container's health check passes.
func waitHealthy(ctx context.Context, o Options, service string, timeout time.Duration) error {
	id, err := container(ctx, o, service)
	if err != nil {
		return err
	}
	return testenv.WaitFor(ctx, timeout, service+" healthy", func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", id).Output()
		if err != nil {
			return false, err
		}
		state := strings.TrimSpace(string(out))
		if strings.HasPrefix(state, "exited") || strings.HasPrefix(state, "dead") {
			logs, _ := exec.CommandContext(ctx, "docker", "logs", "--tail", "30", id).CombinedOutput()
			return false, testenv.Permanent(fmt.Errorf("%s %s:\n%s", service, state, logs))
		}
		return state == "running healthy", nil
	})
}

// publishedPort is 127.0.0.1:<port> where Docker publishes the service's container port.
func publishedPort(ctx context.Context, o Options, service string, port int) (string, error) {
	out, err := composeOut(ctx, o, "port", service, fmt.Sprint(port))
	if err != nil {
		return "", err
	}
	hostPort := strings.TrimSpace(out)
	if i := strings.LastIndex(hostPort, ":"); i >= 0 {
		return "127.0.0.1" + hostPort[i:], nil
	}
	return "", fmt.Errorf("service %s: port %d is not published (%q)", service, port, hostPort)
}

// readFile copies a file out of a service's container.
func readFile(ctx context.Context, o Options, service, path string) ([]byte, error) {
	id, err := container(ctx, o, service)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "aicr-compose-cp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	dst := filepath.Join(dir, filepath.Base(path))
	if err := docker(ctx, "cp", id+":"+path, dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// hostKubeconfig writes the cluster's admin kubeconfig for this machine: the published port.
func hostKubeconfig(ctx context.Context, o Options, path string) error {
	raw, err := readFile(ctx, o, "cluster", "/shared/kubeconfig")
	if err != nil {
		return err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return fmt.Errorf("the cluster's kubeconfig: %w", err)
	}
	addr, err := publishedPort(ctx, o, "cluster", 6443)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// waitRegistry waits until the registry answers /v2/ (401 without credentials).
func waitRegistry(ctx context.Context, host string) error {
	return testenv.WaitFor(ctx, time.Minute, "registry up", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusOK, nil
	})
}

// PublishedPort is 127.0.0.1:<port> where Docker publishes a service's container port.
func (s *Stack) PublishedPort(ctx context.Context, service string, port int) (string, error) {
	return publishedPort(ctx, s.opts, service, port)
}

// ReadFile copies a file out of a service's container.
func (s *Stack) ReadFile(ctx context.Context, service, path string) ([]byte, error) {
	return readFile(ctx, s.opts, service, path)
}
