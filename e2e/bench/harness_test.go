//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	argoclient "github.com/argoproj/argo-cd/v3/pkg/client/clientset/versioned"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// Names the benchmark's cluster uses; the flags are the ones the Helm chart passes.
const (
	operatorNamespace = "aicr-system"
	engineNamespace   = "argocd"
	project           = "aicr"
	repoCredsSecret   = "aicr-registry"
	bundleConfigMap   = "aicr-bundle"
	// repository is a registry path no registry serves: no Argo CD runs, so no chart is pulled.
	repository = "registry.bench.invalid/aicr"
	// chartDigest is the small placeholder digest every release pins.
	chartDigest = "sha256:4c3db97306cbd0cad510ff970663aa0aa064d31816d84d5e6397aec4fdfb3d50"
)

// Timeouts of the waits.
const (
	binaryReadyTimeout = 2 * time.Minute
	idleTimeout        = 45 * time.Second
	stopTimeout        = 15 * time.Second
)

// harness is the shared environment: the apiserver, NATS, and the binaries it started.
type harness struct {
	// ctx is the whole run's: what outlives one benchmark (the fake Argo CD's watch) runs under
	// it, so it ends before the API server is stopped (an open watch holds the server's
	// graceful shutdown until testenv kills it).
	ctx        context.Context
	env        *testenv.Env
	cfg        *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	argo       argoclient.Interface
	nats       *server.Server
	natsURL    string
	nc         *nats.Conn
	js         jetstream.JetStream
	binDir     string
	dir        string
	kubeconfig string
	procs      map[string]*proc
	// noLeaderElection starts the leader-elected binaries without --leader-elect (see
	// withOwnAPIServer).
	noLeaderElection bool
}

// proc is one running binary.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	// metricsURL is its /metrics.
	metricsURL string
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func newHarness(ctx context.Context, env *testenv.Env, binDir string) (*harness, error) {
	// A folder of its own: the binaries' logs and kubeconfig outlive a sweep of testenv folders.
	dir, err := os.MkdirTemp("", "aicr-bench-")
	if err != nil {
		return nil, err
	}
	h := &harness{ctx: ctx, env: env, binDir: binDir, dir: dir, procs: map[string]*proc{}}
	if err := os.MkdirAll(filepath.Join(h.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return nil, err
	}
	h.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(h.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	h.cfg = cfg
	if h.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if h.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if h.argo, err = argoclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// An in-process JetStream server: the benchmark measures the operator's hops, not a
	// separate nats-server process's scheduling on a busy machine.
	h.nats, err = server.NewServer(&server.Options{ServerName: "bench", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: filepath.Join(h.dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("create nats server: %w", err)
	}
	go h.nats.Start()
	if !h.nats.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("the in-process nats server did not accept connections within 10s")
	}
	h.natsURL = h.nats.ClientURL()
	if h.nc, err = nats.Connect(h.natsURL, nats.Name("bench")); err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	if h.js, err = jetstream.New(h.nc); err != nil {
		return nil, err
	}
	// The planner's stream setup, done up front: a benchmark may run the applier without it.
	if _, err := dispatch.EnsureSetup(ctx, h.js, 1); err != nil {
		return nil, err
	}
	return h, h.prepareCluster(ctx)
}

// prepareCluster creates what the Helm chart and an Argo CD installation leave behind: the
// namespaces, the AppProject and the repo-creds Secret (static mode).
func (h *harness) prepareCluster(ctx context.Context) error {
	for _, ns := range []string{operatorNamespace, engineNamespace} {
		if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	proj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": project, "namespace": engineNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"oci://" + repository + "/charts/*"},
			"destinations":             []any{map[string]any{"server": "https://kubernetes.default.svc", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	if _, err := h.dyn.Resource(testenv.AppProjectGVR).Namespace(engineNamespace).Create(ctx, proj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create appproject: %w", err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: repoCredsSecret, Namespace: engineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: map[string]string{"type": "oci", "url": "oci://" + repository, "username": "bench", "password": "bench-not-a-secret"},
	}
	if _, err := h.kube.CoreV1().Secrets(engineNamespace).Create(ctx, creds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create repo-creds secret: %w", err)
	}
	return nil
}

func (h *harness) close(keepLogs bool) {
	for name := range h.procs {
		_ = h.stop(name)
	}
	if h.nc != nil {
		h.nc.Close()
	}
	if h.nats != nil {
		h.nats.Shutdown()
		h.nats.WaitForShutdown()
	}
	if !keepLogs && os.Getenv("AICR_KEEP_TESTENV") == "" {
		_ = os.RemoveAll(h.dir)
	} else {
		fmt.Fprintf(os.Stderr, "bench: logs kept in %s\n", filepath.Join(h.dir, "logs"))
	}
}

// flags returns the flags the Helm chart passes to binary (without leader election's NATS
// credentials: the embedded server is open).
func (h *harness) flags(binary string, healthPort, metricsPort int) ([]string, error) {
	common := []string{
		"--nats-url=" + h.natsURL, "--kubeconfig=" + h.kubeconfig, "--namespace=" + operatorNamespace,
		"--health-addr=127.0.0.1:" + strconv.Itoa(healthPort), "--metrics-addr=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--log-format=json", "--log-level=info",
	}
	elect := "--leader-elect"
	if h.noLeaderElection {
		elect = "--leader-elect=false"
	}
	switch binary {
	case "planner":
		return append(common, elect, "--engine-namespace="+engineNamespace, "--engine-project="+project, "--registry-repository="+repository), nil
	case "applier":
		return append(common, "--engine-namespace="+engineNamespace, "--engine-project="+project, "--registry-repository="+repository), nil
	case "readiness":
		return append(common, elect, "--engine-namespace="+engineNamespace, "--engine-project="+project, "--registry-repository="+repository), nil
	case "credrefresher":
		return append(common, elect, "--engine-namespace="+engineNamespace, "--registry-repository="+repository,
			"--registry-auth=static", "--repo-creds-secret="+repoCredsSecret), nil
	case "admission":
		cert, key, err := h.webhookCert()
		if err != nil {
			return nil, err
		}
		port, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		return append(common, "--engine-namespace="+engineNamespace, fmt.Sprintf("--webhook-addr=127.0.0.1:%d", port),
			"--tls-cert-file="+cert, "--tls-key-file="+key, "--operator-identities="+operatorIdentities()), nil
	}
	return nil, fmt.Errorf("unknown binary %s", binary)
}

// start starts binary from the bin folder under name (several appliers run at once) and waits
// until its /readyz answers 200.
func (h *harness) start(ctx context.Context, name, binary string) (*proc, error) {
	return h.startWith(ctx, name, binary)
}

// startWith is start with env (KEY=value) added to the binary's environment.
func (h *harness) startWith(ctx context.Context, name, binary string, env ...string) (*proc, error) {
	return h.startFrom(ctx, h.binDir, name, binary, env...)
}

// startFrom is startWith with the binary from dir, not the bin folder.
func (h *harness) startFrom(ctx context.Context, dir, name, binary string, env ...string) (*proc, error) {
	ports := make([]int, 2)
	for i := range ports {
		p, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	args, err := h.flags(binary, ports[0], ports[1])
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(h.dir, "logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(dir, binary), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(os.Environ(), "POD_NAME="+name), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
	h.procs[name] = p
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0])
	err = testenv.WaitFor(ctx, binaryReadyTimeout, name+" ready", func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return true, nil // reported below
		default:
		}
		return httpOK(ctx, url), nil
	})
	select {
	case <-p.exited:
		delete(h.procs, name)
		return nil, fmt.Errorf("%s exited: %s", name, lastLines(logPath, 3))
	default:
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// stop sends SIGTERM and waits for the process to end (SIGKILL after stopTimeout).
func (h *harness) stop(name string) error {
	p := h.procs[name]
	if p == nil {
		return nil
	}
	delete(h.procs, name)
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", name, stopTimeout)
	}
}

// rolloutBinaries are the binaries a rollout runs through.
var rolloutBinaries = []string{"planner", "applier", "readiness"}

// useBinaries restarts the rolloutBinaries from dir when they run from another folder; every
// later start uses dir too. A binary of another build that does not take the flags this
// harness passes exits at once, and the error says so with its log's last lines.
func (h *harness) useBinaries(ctx context.Context, dir string) error {
	if h.binDir == dir {
		return nil
	}
	for _, bin := range rolloutBinaries {
		if err := h.stop(bin); err != nil {
			return err
		}
	}
	h.binDir = dir
	for _, bin := range rolloutBinaries {
		if _, err := h.start(ctx, bin, bin); err != nil {
			return fmt.Errorf("start %s from %s: %w", bin, dir, err)
		}
	}
	return nil
}

// operatorIdentities are the service accounts of the five binaries, as the chart passes them.
func operatorIdentities() string {
	return strings.Join(v1alpha1.OperatorIdentities(operatorNamespace), ",")
}

func lastLines(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// procStatus reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// cpuTicks is the process's user plus system time in clock ticks (/proc/<pid>/stat).
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// the command name may hold spaces: fields start after the last ')'
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable cpu times in /proc stat")
	}
	return u + s, nil
}

// msPerTick is a clock tick of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux) in ms.
const msPerTick = 10

// ticksMs is t clock ticks in milliseconds.
func ticksMs(t int64) float64 { return float64(t * msPerTick) }

// idleWindow and idleTicks define idle: at most idleTicks clock ticks (10 ms each) of CPU in
// the last idleWindow.
const (
	idleWindow = 2 * time.Second
	idleTicks  = 10
)

// waitIdle waits until p used at most idleTicks of CPU over idleWindow, and returns its VmRSS
// in KiB then.
func waitIdle(ctx context.Context, p *proc) (int64, error) {
	var samples []struct {
		at    time.Time
		ticks int64
	}
	err := testenv.WaitFor(ctx, idleTimeout, p.name+" idle", func(context.Context) (bool, error) {
		t, err := cpuTicks(p.pid())
		if err != nil {
			return false, err
		}
		now := time.Now()
		samples = append(samples, struct {
			at    time.Time
			ticks int64
		}{now, t})
		for len(samples) > 1 && now.Sub(samples[1].at) >= idleWindow {
			samples = samples[1:]
		}
		first := samples[0]
		return now.Sub(first.at) >= idleWindow && t-first.ticks <= idleTicks, nil
	})
	if err != nil {
		return 0, err
	}
	return procStatus(p.pid(), "VmRSS")
}

// webhookCert writes a serving certificate for the admission binary (tlstest: the one test CA).
func (h *harness) webhookCert() (string, string, error) {
	certFile, keyFile := filepath.Join(h.dir, "webhook.crt"), filepath.Join(h.dir, "webhook.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	ca, err := tlstest.NewCA("aicr-webhook-ca")
	if err != nil {
		return "", "", err
	}
	srv, err := ca.Server("aicr-admission")
	if err != nil {
		return "", "", fmt.Errorf("create webhook certificate: %w", err)
	}
	if err := os.WriteFile(certFile, srv.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, srv.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
