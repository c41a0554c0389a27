package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Named timeouts of the start phases. They are generous: a loaded 2-core machine running the race
// detector is the reference, and a timeout only costs time when something is broken.
const (
	// DefaultStartTimeout bounds a whole Start unless Options.StartTimeout says otherwise.
	DefaultStartTimeout = 5 * time.Minute
	// DefaultArgoCDAppResync is Options.ArgoCDAppResync's default, as in the local stack.
	DefaultArgoCDAppResync = 30 * time.Second

	etcdReadyTimeout      = 30 * time.Second
	apiServerReadyTimeout = 2 * time.Minute
	crdEstablishedTimeout = time.Minute
	// crdRemovedTimeout: removing Argo CD's CRDs takes 1 to 2 s once their storage is ready
	// (DeleteCRDs waits for it first; without that, the finalizer's backoff once ran past three
	// minutes on a loaded machine). The error says how far the API server's finalizer got.
	crdRemovedTimeout      = 3 * time.Minute
	controllerReadyTimeout = time.Minute
	nodeReadyTimeout       = time.Minute
	argoCDReadyTimeout     = time.Minute
	registryReadyTimeout   = 30 * time.Second
	// probeTimeout bounds one readiness probe, so a server that accepts and hangs is asked again.
	probeTimeout = 10 * time.Second
)

// maxStartAttempts is how often Start tries when a port was taken between FreePort and the bind.
const maxStartAttempts = 3

// dirPrefix names every environment folder in the system temp dir.
const dirPrefix = "aicr-testenv-"

// Options selects what Start runs next to etcd and kube-apiserver. The zero value is a bare
// control plane with the operator's and Argo CD's CRDs installed.
type Options struct {
	// ControllerManager runs kube-controller-manager (default ServiceAccounts, Deployments ->
	// ReplicaSets -> Pods, Jobs, garbage collection, namespace deletion).
	ControllerManager bool
	// Scheduler runs kube-scheduler.
	Scheduler bool
	// Kwok runs kwok with one fake node (NodeName) that turns Ready; its pods become Running and
	// Ready, and Job pods Succeeded, without running anything. Kwok implies ControllerManager and
	// Scheduler: with them, Deployments become Available and Jobs Complete.
	Kwok bool

	// ArgoCD runs Argo CD v3.4.2 (redis, repo-server, application-controller) watching namespace
	// ArgoCDNamespace, with argocd-cm, argocd-rbac-cm, argocd-secret and the default AppProject
	// created. Without Kwok, Applications whose charts hold workloads never become Healthy.
	ArgoCD bool
	// ArgoCDAppResync is the controller's --app-resync period and argocd-cm's
	// timeout.reconciliation; DefaultArgoCDAppResync when zero.
	ArgoCDAppResync time.Duration
	// ArgoCDControllerArgs are extra application-controller flags (e.g. --persist-resource-health).
	ArgoCDControllerArgs []string

	// Registry runs a distribution OCI registry on loopback, plain HTTP (Env.Registry, PushChart).
	Registry bool
	// RegistryAuth, when set, makes the registry require these credentials (htpasswd, bcrypt).
	RegistryAuth *BasicAuth

	// SkipOperatorCRDs leaves out the operator's CRDs (shared/api/crds).
	SkipOperatorCRDs bool
	// SkipArgoCRDs leaves out Argo CD's CRDs; install them later with Env.InstallArgoCRDs.
	// Not allowed together with ArgoCD.
	SkipArgoCRDs bool
	// ApplicationSetCRD installs Argo CD's ApplicationSet CRD beside the Application and AppProject
	// ones. Off by default: nothing in this repository, nor Argo CD's application controller and
	// repo-server, uses ApplicationSets, and the CRD is 1.4 MB, which the apiserver takes seconds
	// of CPU to establish (6.7 s on a loaded machine) in every environment that installs it.
	ApplicationSetCRD bool

	// AuditApplications makes the API server log every list, watch and get of an Argo CD
	// Application (its request URI and user agent), each before it is answered, for
	// Env.ApplicationReads: which Applications a binary lists, watches and gets.
	AuditApplications bool

	// APIServerArgs are extra kube-apiserver flags, appended last: a plain flag given again
	// overrides testenv's value, a list flag (--enable-admission-plugins) adds to it.
	APIServerArgs []string
	// EtcdArgs are extra etcd flags, appended last (a flag given again overrides testenv's).
	EtcdArgs []string

	// ToolsDir is the folder with the binaries; when empty, $AICR_TOOLS_BIN, then hack/tools.sh.
	ToolsDir string
	// StartTimeout bounds Start; DefaultStartTimeout when zero.
	StartTimeout time.Duration
	// Log receives start-up timing and failure logs; os.Stderr when nil.
	Log io.Writer
}

// BasicAuth is a user name and password.
type BasicAuth struct {
	Username string
	Password string
}

func (o Options) withDefaults() Options {
	if o.Kwok {
		o.ControllerManager, o.Scheduler = true, true
	}
	if o.ArgoCDAppResync == 0 {
		o.ArgoCDAppResync = DefaultArgoCDAppResync
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	return o
}

func (o Options) validate() error {
	if o.ArgoCD && o.SkipArgoCRDs {
		return errors.New("testenv: options: ArgoCD needs Argo CD's CRDs; drop SkipArgoCRDs")
	}
	if o.ArgoCDAppResync < time.Second {
		return fmt.Errorf("testenv: options: ArgoCDAppResync %s is below the 1s Argo CD accepts", o.ArgoCDAppResync)
	}
	if o.RegistryAuth != nil && (!o.Registry || o.RegistryAuth.Username == "" || o.RegistryAuth.Password == "" ||
		strings.ContainsAny(o.RegistryAuth.Username, ":\n")) {
		return errors.New("testenv: options: RegistryAuth needs Registry and a non-empty username (no ':') and password")
	}
	return nil
}

// Env is a running environment. Its fields are read-only.
type Env struct {
	// Config is a cluster-admin (system:masters) client config with high QPS/Burst limits.
	Config *rest.Config
	// Kubeconfig is the path of a self-contained kubeconfig for the same identity.
	Kubeconfig string
	// Dir holds everything of this environment: pki/, logs/, etcd data, pids, kubeconfig.
	Dir string
	// CAFile is the path of the cluster CA certificate (PEM), CAPEM its content.
	CAFile string
	CAPEM  []byte
	// APIServerURL is https://127.0.0.1:<port>; EtcdURL is http://127.0.0.1:<port>.
	APIServerURL string
	EtcdURL      string
	// ToolsDir is the folder the binaries came from.
	ToolsDir string
	// NodeName is kwok's fake node ("" without Options.Kwok).
	NodeName string
	// Registry is set with Options.Registry.
	Registry *Registry
	// ArgoCD is set with Options.ArgoCD.
	ArgoCD *ArgoCD

	opts    Options
	keep    keepMode
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	pki     *pki
	files   pkiFiles
	argoCRD string // folder of Argo CD's CRD files
	// applicationAuditLog is the API server's audit log with Options.AuditApplications.
	applicationAuditLog string

	mu    sync.Mutex
	procs []*proc
	ready map[string]readiness
	// restart holds what must happen before a process is started again (StartProcess).
	restart map[string]func(context.Context) error
	once    sync.Once
	errRun  error
}

// keepMode is how much of an environment survives Stop (AICR_KEEP_TESTENV).
type keepMode int

const (
	keepNothing keepMode = iota
	keepDir
	keepRunning
)

func keepFromEnv() keepMode {
	switch v := os.Getenv(EnvKeep); v {
	case "", "0", "false":
		return keepNothing
	case "running":
		return keepRunning
	default:
		return keepDir
	}
}

// Start starts an environment. The error wraps ErrToolsMissing (as *MissingToolsError) when a
// needed binary is not available; any other error means the tools are there but did not come up,
// and the tail of every process's log has been written to Options.Log.
func Start(opts Options) (*Env, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	toolsDir, err := resolveTools(opts)
	if err != nil {
		return nil, err
	}
	sweepStale(os.TempDir())
	for attempt := 1; ; attempt++ {
		env, err := start(opts, toolsDir)
		if err == nil {
			return env, nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == maxStartAttempts {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "testenv: a port was taken during start, retrying (%d/%d): %v\n", attempt, maxStartAttempts, err)
	}
}

func start(opts Options, toolsDir string) (_ *Env, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	begin := time.Now()

	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create environment dir: %w", err)
	}
	e := &Env{Dir: dir, ToolsDir: toolsDir, opts: opts, keep: keepFromEnv(), ready: map[string]readiness{},
		restart: map[string]func(context.Context) error{}}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("write owner file: %w", err)
	}
	for _, sub := range []string{"logs", "tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("create %s dir: %w", sub, err)
		}
	}
	if opts.AuditApplications {
		args, path, err := applicationAuditArgs(dir)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("write the audit policy: %w", err)
		}
		e.opts.APIServerArgs = append(args, opts.APIServerArgs...)
		e.applicationAuditLog = path
	}
	defer func() {
		if err != nil {
			e.dumpLogs(opts.Log)
			if e.keep == keepRunning {
				e.keep = keepDir // nothing to poke at: stop the half-started processes, keep the logs
			}
			if stopErr := e.Stop(); stopErr != nil {
				fmt.Fprintf(opts.Log, "testenv: stop after failed start: %v\n", stopErr)
			}
		}
	}()

	var timings []string
	phase := func(name string, f func(context.Context) error) error {
		t0 := time.Now()
		if err := f(ctx); err != nil {
			return err
		}
		timings = append(timings, fmt.Sprintf("%s %.1fs", name, time.Since(t0).Seconds()))
		return nil
	}
	phases := []struct {
		name string
		on   bool
		f    func(context.Context) error
	}{
		{"pki", true, e.setupPKI},
		{"etcd", true, e.startEtcd},
		{"apiserver", true, e.startAPIServer},
		{"crds", !opts.SkipOperatorCRDs || !opts.SkipArgoCRDs, e.installDefaultCRDs},
		{"registry", opts.Registry, e.startRegistry},
		{"controller-manager", opts.ControllerManager, e.startControllerManager},
		{"scheduler", opts.Scheduler, e.startScheduler},
		{"kwok", opts.Kwok, e.startKwok},
		{"argocd", opts.ArgoCD, e.startArgoCD},
	}
	for _, p := range phases {
		if !p.on {
			continue
		}
		if err := phase(p.name, p.f); err != nil {
			return nil, fmt.Errorf("testenv: start %s (dir %s): %w", p.name, dir, err)
		}
	}
	fmt.Fprintf(opts.Log, "testenv: %s; total %.1fs (%s)\n", strings.Join(timings, ", "), time.Since(begin).Seconds(), dir)
	return e, nil
}

// Stop stops every process in reverse start order (the apiserver before etcd): SIGTERM to its
// process group, SIGKILL after 10 s. It then removes Dir, unless AICR_KEEP_TESTENV is set. It is
// safe to call more than once; later calls return the first result.
func (e *Env) Stop() error {
	e.once.Do(func() { e.errRun = e.stop() })
	return e.errRun
}

func (e *Env) stop() error {
	log := e.opts.Log
	if e.keep == keepRunning {
		if err := os.WriteFile(filepath.Join(e.Dir, keptFile), nil, 0o600); err != nil {
			return fmt.Errorf("mark kept dir: %w", err)
		}
		// one at a time, newest first: a kube-apiserver whose etcd went first hangs on SIGTERM
		fmt.Fprintf(log, "testenv: %s=running: left running, export KUBECONFIG=%s; stop with:\n"+
			"  tac %s | while read -r name pid; do kill -TERM -- -$pid; while kill -0 $pid 2>/dev/null; do sleep 0.2; done; done\n",
			EnvKeep, e.Kubeconfig, filepath.Join(e.Dir, pidsFile))
		return nil
	}
	begin := time.Now()
	e.mu.Lock()
	procs := slices.Clone(e.procs)
	e.mu.Unlock()
	var errs []error
	for _, p := range slices.Backward(procs) {
		killed, err := p.stop(stopGracePeriod)
		if killed {
			fmt.Fprintf(log, "testenv: %s ignored SIGTERM for %s and was killed\n", p.spec.name, stopGracePeriod)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if e.keep == keepDir {
		if err := os.WriteFile(filepath.Join(e.Dir, keptFile), nil, 0o600); err != nil {
			errs = append(errs, fmt.Errorf("mark kept dir: %w", err))
		}
		fmt.Fprintf(log, "testenv: stopped in %.1fs, kept %s (%s=%s)\n", time.Since(begin).Seconds(), e.Dir, EnvKeep, os.Getenv(EnvKeep))
	} else {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove environment dir: %w", err))
		}
		fmt.Fprintf(log, "testenv: stopped in %.1fs (%s)\n", time.Since(begin).Seconds(), e.Dir)
	}
	return errors.Join(errs...)
}

// Processes lists the environment's processes in start order.
func (e *Env) Processes() []Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Process, 0, len(e.procs))
	for _, p := range e.procs {
		out = append(out, Process{Name: p.spec.name, PID: p.cmd.Process.Pid, Log: p.logPath})
	}
	return out
}

// LogPath returns the log file of the named process (Proc* constants).
func (e *Env) LogPath(name string) string { return filepath.Join(e.Dir, "logs", name+".log") }

// StopProcess stops one process (e.g. ProcKwok, to hold pods Pending and a rollout Progressing)
// the way Stop does. StartProcess starts it again.
func (e *Env) StopProcess(name string) error {
	p, _, err := e.find(name)
	if err != nil {
		return err
	}
	if _, err := p.stop(stopGracePeriod); err != nil {
		return fmt.Errorf("stop process %s: %w", name, err)
	}
	return nil
}

// StartProcess starts a process stopped by StopProcess again, with the same flags and ports,
// and waits until it is ready.
func (e *Env) StartProcess(ctx context.Context, name string) error {
	p, i, err := e.find(name)
	if err != nil {
		return err
	}
	if !p.exited() {
		return fmt.Errorf("start process %s: still running (pid %d)", name, p.cmd.Process.Pid)
	}
	e.mu.Lock()
	before := e.restart[name]
	e.mu.Unlock()
	if before != nil {
		if err := before(ctx); err != nil {
			return fmt.Errorf("start process %s: %w", name, err)
		}
	}
	np, err := startProc(p.spec, filepath.Join(e.Dir, "logs"), e.keep != keepRunning)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.procs[i] = np
	ready := e.ready[name]
	e.mu.Unlock()
	if err := e.writePIDs(); err != nil {
		return err
	}
	return e.waitReady(ctx, np, ready.probe, ready.timeout)
}

// readiness is how to tell that a process is ready, and how long it may take.
type readiness struct {
	probe   func(context.Context) (bool, error)
	timeout time.Duration
}

func (e *Env) find(name string) (*proc, int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, p := range e.procs {
		if p.spec.name == name {
			return p, i, nil
		}
	}
	return nil, 0, fmt.Errorf("find process %s: not part of this environment", name)
}

// launch starts spec and waits until ready reports true (or the process exits).
func (e *Env) launch(ctx context.Context, spec procSpec, timeout time.Duration, ready func(context.Context) (bool, error)) error {
	p, err := startProc(spec, filepath.Join(e.Dir, "logs"), e.keep != keepRunning)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.ready[spec.name] = readiness{probe: ready, timeout: timeout}
	e.mu.Unlock()
	if err := e.writePIDs(); err != nil {
		return err
	}
	return e.waitReady(ctx, p, ready, timeout)
}

func (e *Env) waitReady(ctx context.Context, p *proc, ready func(context.Context) (bool, error), timeout time.Duration) error {
	return WaitFor(ctx, timeout, p.spec.name+" ready", func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, Permanent(p.exitError())
		}
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		return ready(ctx)
	})
}

func (e *Env) writePIDs() error { return writePIDs(filepath.Join(e.Dir, pidsFile), e.Processes()) }

// dumpLogs writes the tail of every process's log to w.
func (e *Env) dumpLogs(w io.Writer) {
	for _, p := range e.Processes() {
		fmt.Fprintf(w, "----- testenv: last %d lines of %s (%s) -----\n%s", logTailLines, p.Name, p.Log, TailFile(p.Log, logTailLines))
	}
}

// path joins elements onto Dir and creates the folder (for per-component state).
func (e *Env) path(elem ...string) (string, error) {
	p := filepath.Join(append([]string{e.Dir}, elem...)...)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", p, err)
	}
	return p, nil
}

func (e *Env) bin(name string) string { return filepath.Join(e.ToolsDir, name) }
