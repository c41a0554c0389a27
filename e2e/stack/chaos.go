package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// NATSServer is the name of the nats-server process of a chaos stack (its log is
// <Dir>/logs/nats-server.log).
const NATSServer = "nats-server"

// ChaosRepository is the registry repository of a chaos stack: no registry runs and nothing
// dials it, so a test can pass it in Options.ExtraFlags before Up.
const ChaosRepository = "registry.chaos.invalid/" + RepositoryPath

// Named timeouts of the chaos stack.
const (
	natsReadyTimeout      = 30 * time.Second
	apiServerKillTimeout  = 30 * time.Second
	apiServerReadyTimeout = 2 * time.Minute
)

// ChaosOptions (Options.Chaos) shape a stack for fault injection: every process the operator
// depends on can be SIGKILLed and started again.
//
//   - NATS runs as a nats-server process (tool nats-server of hack/tools.sh) on a fixed port with
//     a JetStream store dir that survives restarts (KillNATS, StartNATS);
//   - no Argo CD processes and no registry: Argo CD's CRDs, the engine namespace and the AppProject
//     only, so the test plays Argo CD itself; charts are never pulled, so a bundle may name any
//     sha256 digest (FakeDigest);
//   - the kube-apiserver can be killed and restarted on its port (KillAPIServer, StartAPIServer).
type ChaosOptions struct {
	// NATSServerPath is the nats-server binary; when empty, nats-server in $AICR_TOOLS_BIN, else
	// in hack/tools.sh's cache.
	NATSServerPath string
	// Namespaces are created for the bundle's components.
	Namespaces []string

	natsArgs   []string // the nats-server command line, fixed at start
	natsHealth string   // its JetStream health URL
}

// FakeDigest is a well-formed chart digest derived from s, for stacks that never pull charts.
func FakeDigest(s string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 64)
	h := uint64(14695981039346656037)
	for i := range b {
		for _, c := range []byte(s) {
			h = (h ^ uint64(c)) * 1099511628211
		}
		h = (h ^ uint64(i)) * 1099511628211
		b[i] = hex[h>>60]
	}
	return "sha256:" + string(b)
}

// upChaos is Up for Options.Chaos.
func upChaos(ctx context.Context, o Options) (s *Stack, err error) {
	natsBin, err := natsServerPath(o.Chaos.NATSServerPath)
	if err != nil {
		return nil, err
	}
	chaos := *o.Chaos
	o.Chaos = &chaos
	start := time.Now()
	env, err := testenv.Start(testenv.Options{Log: o.Log, SkipApplicationSetCRD: true})
	if err != nil {
		return nil, err
	}
	s, err = attach(env, o)
	defer func() {
		if err != nil {
			_ = s.Down()
		}
	}()
	if err != nil {
		return s, err
	}
	fmt.Fprintf(o.Log, "stack: kubernetes up in %s (chaos: no Argo CD, no registry)\n", time.Since(start).Round(100*time.Millisecond))
	s.Repository = ChaosRepository
	if err := s.prepareChaosCluster(ctx, o.Chaos.Namespaces); err != nil {
		return s, err
	}
	if err := s.startNATSProcess(ctx, natsBin); err != nil {
		return s, err
	}
	if s.hookPort, err = testenv.FreePort(); err != nil {
		return s, err
	}
	if err := s.startBinaries(ctx); err != nil {
		return s, err
	}
	fmt.Fprintf(o.Log, "stack: operator up in %s (nats %s)\n", time.Since(start).Round(100*time.Millisecond), s.NATSURL)
	return s, nil
}

func natsServerPath(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if dir := os.Getenv(testenv.EnvToolsBin); dir != "" {
		if p := filepath.Join(dir, NATSServer); isFile(p) {
			return p, nil
		}
	}
	root, err := ChartsDir() // <repo>/examples/charts
	if err == nil {
		out, err := exec.Command("bash", filepath.Join(root, "..", "..", "hack", "tools.sh"), "path", NATSServer).Output()
		if p := filepath.Join(strings.TrimSpace(string(out)), "bin", NATSServer); err == nil && isFile(p) {
			return p, nil
		}
	}
	return "", &testenv.MissingToolsError{Tools: []string{NATSServer}}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// prepareChaosCluster creates what the Helm chart and Argo CD's installation would: the
// namespaces, the AppProject, a repo-creds Secret (credrefresher's static check reads it) and
// the binaries' identities.
func (s *Stack) prepareChaosCluster(ctx context.Context, namespaces []string) error {
	for _, ns := range append([]string{OperatorNamespace, EngineNamespace}, namespaces...) {
		_, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	whitelist, err := ClusterResourceWhitelist()
	if err != nil {
		return err
	}
	dests := []any{}
	for _, ns := range namespaces {
		dests = append(dests, map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns})
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": Project, "namespace": EngineNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"oci://" + s.Repository + "/charts/*", "oci://" + s.Repository + "/wrappers/*"},
			"destinations":             dests,
			"clusterResourceWhitelist": whitelist,
		},
	}}
	if _, err := s.Dynamic.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}).
		Namespace(EngineNamespace).Create(ctx, project, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create appproject: %w", err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RepoCredsSecret, Namespace: EngineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: map[string]string{"type": "oci", "url": "oci://" + s.Repository, "username": "aicr", "password": natstest.RandomPassword()},
	}
	if _, err := s.Kube.CoreV1().Secrets(EngineNamespace).Create(ctx, creds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create repo-creds secret: %w", err)
	}
	return s.createIdentities(ctx)
}

// startNATSProcess runs nats-server with JetStream on a port and store dir it keeps for the
// life of the stack, so StartNATS after KillNATS finds the streams and their messages again.
func (s *Stack) startNATSProcess(ctx context.Context, bin string) error {
	ports, err := testenv.FreePorts(2)
	if err != nil {
		return err
	}
	if s.natsSetup, err = newNATSSetup(s.Dir); err != nil {
		return err
	}
	cfg := s.natsSetup.config("127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1]), filepath.Join(s.Dir, "nats"))
	cfg.ServerName = "aicr-chaos"
	path, err := writeConfig(s.Dir, cfg)
	if err != nil {
		return err
	}
	s.NATSURL = "tls://127.0.0.1:" + strconv.Itoa(ports[0])
	s.opts.Chaos.natsArgs = []string{bin, "--config", path}
	s.opts.Chaos.natsHealth = fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", ports[1])
	return s.StartNATS(ctx)
}

// StartNATS starts the chaos stack's nats-server (again) and waits until JetStream answers.
func (s *Stack) StartNATS(ctx context.Context) error {
	if s.opts.Chaos == nil || len(s.opts.Chaos.natsArgs) == 0 {
		return errors.New("start nats-server: not a chaos stack (Options.Chaos)")
	}
	logPath := filepath.Join(s.Dir, "logs", NATSServer+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.opts.Chaos.natsArgs[0], s.opts.Chaos.natsArgs[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", NATSServer, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.procs[NATSServer], s.exits[NATSServer] = cmd, exited
	s.mu.Unlock()
	return testenv.WaitFor(ctx, natsReadyTimeout, NATSServer+" ready", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("%s exited: see %s", NATSServer, logPath)
		default:
		}
		return httpOK(ctx, s.opts.Chaos.natsHealth), nil
	})
}

// KillNATS SIGKILLs the chaos stack's nats-server.
func (s *Stack) KillNATS() error { return s.StopBinary(NATSServer, true) }

// KillAPIServer SIGKILLs the kube-apiserver (etcd keeps the data) and waits until it is reaped.
func (s *Stack) KillAPIServer(ctx context.Context) error {
	pid := 0
	for _, p := range s.Env.Processes() {
		if p.Name == testenv.ProcAPIServer {
			pid = p.PID
		}
	}
	if pid == 0 {
		return errors.New("kill kube-apiserver: not running")
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts the kube-apiserver killed by KillAPIServer on the same port and waits
// until it is ready.
func (s *Stack) StartAPIServer(ctx context.Context) error {
	// The process is reaped by testenv's wait goroutine; until then StartProcess says it runs.
	err := testenv.WaitFor(ctx, apiServerKillTimeout, "kube-apiserver reaped", func(ctx context.Context) (bool, error) {
		err := s.Env.StartProcess(ctx, testenv.ProcAPIServer)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	// StartProcess waited for /readyz; the port must also accept connections from the clients.
	return testenv.WaitFor(ctx, apiServerReadyTimeout, "kube-apiserver answers", func(ctx context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.Env.APIServerURL, "https://"), time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		_, err = s.Kube.Discovery().ServerVersion()
		return err == nil, nil
	})
}

// Crashed reports whether a process the stack started (a binary, or a chaos stack's
// nats-server) exited by itself: it was not stopped with StopBinary or KillNATS. A supervisor
// plays the kubelet with it: StopBinary, then StartBinary again.
func (s *Stack) Crashed(name string) bool {
	s.mu.Lock()
	cmd, exited := s.procs[name], s.exits[name]
	s.mu.Unlock()
	if cmd == nil || exited == nil {
		return false
	}
	select {
	case <-exited:
		return true
	default:
		return false
	}
}
