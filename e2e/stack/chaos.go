package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// NATSServer is the name of the nats-server process of a chaos stack with one NATS node (its
// log is <Dir>/logs/nats-server.log); the nodes of a cluster are nats-0, nats-1, nats-2.
const NATSServer = "nats-server"

// ChaosRepository is the registry repository of a chaos stack: no registry runs and nothing
// dials it, so a test can pass it in Options.ExtraFlags before Up.
const ChaosRepository = "registry.chaos.invalid/" + RepositoryPath

// InstanceExtra is the user-info extra key that carries the process name (planner-0, ...) in
// every request a chaos stack's binary makes: the binaries of one kind share a service account,
// and the kube-apiserver's audit log (ChaosOptions.Audit) tells them apart by this key.
const InstanceExtra = "chaos.aicr.run/instance"

// Named timeouts of the chaos stack.
const (
	natsReadyTimeout      = time.Minute
	apiServerKillTimeout  = 30 * time.Second
	apiServerReadyTimeout = 2 * time.Minute
	etcdReadyTimeout      = time.Minute
)

// ChaosOptions (Options.Chaos) shape a stack for fault injection: every process the operator
// depends on can be SIGKILLed (or paused) and started again.
//
//   - each binary runs Replicas[binary] processes (default 1), named <binary>-<i> (Instances):
//     applier replicas share the command queue, admission replicas sit behind one webhook port
//     (a Proxy, round robin with failover), leader-elected binaries run as candidates with
//     --identity=<binary>-<i>;
//   - NATS runs as nats-server processes (tool nats-server of hack/tools.sh) with JetStream store
//     dirs that survive restarts: one node, or with NATSNodes 3 a cluster whose streams the
//     binaries declare at replication 3, every client and route connection through a Proxy the
//     test can silence (PartitionNATS);
//   - no Argo CD processes and no registry: Argo CD's CRDs, the engine namespace and the AppProject
//     only, so the test plays Argo CD itself; charts are never pulled, so a bundle may name any
//     sha256 digest (FakeDigest); with ArgoCD, real Argo CD, kwok and a registry instead;
//   - etcd and the kube-apiserver can be killed and restarted on their ports (KillEnv, StartEnv);
//   - with Audit, the kube-apiserver writes an audit event of every write but Leases to its log.
type ChaosOptions struct {
	// NATSServerPath is the nats-server binary; when empty, nats-server in $AICR_TOOLS_BIN, else
	// in hack/tools.sh's cache.
	NATSServerPath string
	// Namespaces are created for the bundle's components.
	Namespaces []string
	// Replicas is the number of processes of a binary (1 when absent).
	Replicas map[string]int
	// NATSNodes is 1 (the default) or 3.
	NATSNodes int
	// Audit turns on the kube-apiserver's audit log of writes (AuditLog).
	Audit bool
	// Env adds variables to an instance's environment, by instance (planner-1: a test-only
	// setting such as AICR_TEST_CLOCK_OFFSET).
	Env map[string][]string
	// APIProxies puts an APIProxy between every instance and the kube-apiserver (its
	// kubeconfig names the proxy), which a test can throttle and partition (Stack.APIProxy).
	APIProxies bool
	// ArgoCD runs real Argo CD v3.4.2 (redis, repo-server, application controller), kwok and an
	// anonymous plain-HTTP registry, as the e2e stack does: the test pushes its charts
	// (AddChart) and a bundle names their real digests. The Argo CD processes can be killed and
	// started again like etcd (KillEnv, StartEnv with testenv.ProcAppController,
	// testenv.ProcRepoServer).
	ArgoCD bool

	nats      map[string]*natsNode
	natsOrder []string
	routes    map[[2]string]*Proxy // routes[{from, to}] carries from's route connections to to
	webhook   *Proxy               // in front of the admission replicas
	auditDir  string               // the audit policy (outside Dir: the apiserver reads it before Dir exists)

	apiCA      *tlstest.CA          // signs the API proxies' certificates
	apiCAPEM   []byte               // its certificate
	apiProxies map[string]*APIProxy // by instance
}

// natsNode is one nats-server process of a chaos stack.
type natsNode struct {
	args   []string // the command line, fixed at start
	health string   // its health URL
	client *Proxy   // clients connect through it (a cluster only)
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

// auditPolicy records every write but the leader elections' Lease renewals, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: None
  verbs: ["get", "list", "watch"]
- level: Metadata
`

// upChaos is Up for Options.Chaos.
func upChaos(ctx context.Context, o Options) (s *Stack, err error) {
	natsBin, err := natsServerPath(o.Chaos.NATSServerPath)
	if err != nil {
		return nil, err
	}
	chaos := *o.Chaos
	o.Chaos = &chaos
	switch chaos.NATSNodes {
	case 0, 1:
		chaos.NATSNodes = 1
	case 3:
	default:
		return nil, fmt.Errorf("chaos stack: NATSNodes %d: use 1 or 3", chaos.NATSNodes)
	}
	start := time.Now()
	envOpts := testenv.Options{Log: o.Log}
	if chaos.ArgoCD {
		envOpts.Kwok, envOpts.ArgoCD, envOpts.Registry = true, true, true
	}
	if chaos.Audit {
		if chaos.auditDir, err = os.MkdirTemp("", "aicr-chaos-audit-"); err != nil {
			return nil, fmt.Errorf("chaos stack: %w", err)
		}
		policy := filepath.Join(chaos.auditDir, "policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			os.RemoveAll(chaos.auditDir)
			return nil, fmt.Errorf("chaos stack: write audit policy: %w", err)
		}
		// "-" is the apiserver's stdout, its log file: the events stay with the environment.
		envOpts.APIServerArgs = []string{"--audit-policy-file=" + policy, "--audit-log-path=-", "--audit-log-format=json"}
	}
	env, err := testenv.Start(envOpts)
	if err != nil {
		if chaos.auditDir != "" {
			os.RemoveAll(chaos.auditDir)
		}
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
	s.Repository = ChaosRepository
	if chaos.ArgoCD {
		fmt.Fprintf(o.Log, "stack: kubernetes, kwok, Argo CD and the registry up in %s (chaos)\n", time.Since(start).Round(100*time.Millisecond))
		s.Repository, s.Digests = env.Registry.Host+"/"+RepositoryPath, map[string]string{}
	} else {
		fmt.Fprintf(o.Log, "stack: kubernetes up in %s (chaos: no Argo CD, no registry)\n", time.Since(start).Round(100*time.Millisecond))
	}
	if err := s.prepareChaosCluster(ctx, o.Chaos.Namespaces); err != nil {
		return s, err
	}
	if err := s.startNATSProcesses(ctx, natsBin); err != nil {
		return s, err
	}
	if s.hookPort, err = testenv.FreePort(); err != nil {
		return s, err
	}
	if n := len(s.Instances("admission")); n > 1 {
		var backends []string
		for range n {
			p, err := testenv.FreePort()
			if err != nil {
				return s, err
			}
			backends = append(backends, "127.0.0.1:"+strconv.Itoa(p))
		}
		if chaos.webhook, err = NewProxy("127.0.0.1:"+strconv.Itoa(s.hookPort), backends...); err != nil {
			return s, err
		}
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
	data := map[string]string{"type": "oci", "url": "oci://" + s.Repository, "username": "aicr", "password": natstest.RandomPassword()}
	if s.opts.Chaos.ArgoCD {
		// The registry is anonymous and plain HTTP: the repo-creds of static mode for it.
		data = map[string]string{"type": "oci", "url": "oci://" + s.Repository, "insecureOCIForceHttp": "true", "username": "", "password": ""}
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RepoCredsSecret, Namespace: EngineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: data,
	}
	if _, err := s.Kube.CoreV1().Secrets(EngineNamespace).Create(ctx, creds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create repo-creds secret: %w", err)
	}
	return s.createIdentities(ctx)
}

// NATSNodes lists the chaos stack's nats-server processes: NATSServer, or nats-0..nats-2.
func (s *Stack) NATSNodes() []string {
	if s.opts.Chaos == nil {
		return nil
	}
	return slices.Clone(s.opts.Chaos.natsOrder)
}

// startNATSProcesses runs nats-server with JetStream on ports and store dirs it keeps for the
// life of the stack, so StartNATS after KillNATS finds the streams and their messages again.
func (s *Stack) startNATSProcesses(ctx context.Context, bin string) error {
	c := s.opts.Chaos
	c.nats = map[string]*natsNode{}
	var err error
	if s.natsSetup, err = newNATSSetup(s.Dir); err != nil {
		return err
	}
	if c.NATSNodes == 1 {
		ports, err := testenv.FreePorts(2)
		if err != nil {
			return err
		}
		cfg := s.natsSetup.config("127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1]), filepath.Join(s.Dir, "nats"))
		cfg.ServerName = "aicr-chaos"
		path, err := writeConfig(s.Dir, cfg)
		if err != nil {
			return err
		}
		s.NATSURL = "tls://127.0.0.1:" + strconv.Itoa(ports[0])
		c.natsOrder = []string{NATSServer}
		c.nats[NATSServer] = &natsNode{
			args:   []string{bin, "--config", path},
			health: fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", ports[1]),
		}
		return s.StartNATS(ctx, NATSServer)
	}
	if err := s.configureNATSCluster(bin); err != nil {
		return err
	}
	for _, name := range c.natsOrder {
		if err := s.spawnNATS(name); err != nil {
			return err
		}
	}
	// The nodes need each other for a JetStream quorum: wait for all of them once all run.
	for _, name := range c.natsOrder {
		if err := s.waitNATS(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// newProxyOnFreePort is NewProxy on a port of testenv.FreePort, so that it cannot take one of the
// ports handed out to the nodes before they bind them (a port of 127.0.0.1:0 can be one).
func newProxyOnFreePort(backend string) (*Proxy, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	return NewProxy("127.0.0.1:"+strconv.Itoa(port), backend)
}

// configureNATSCluster writes a config file per node: the stack's bus (TLS, the binaries'
// identities; nats.go) with a cluster block. Each node listens for clients and routes on ports of
// its own; clients reach node i only through its client Proxy, and node i reaches node j only
// through the Proxy routes[{i, j}], so cutting the proxies of a node partitions it from its peers
// and its clients. Nodes advertise neither their client URLs (no_advertise) nor a reachable route
// URL (advertise names a port nothing listens on), so no connection learnt by gossip goes around
// the proxies. The proxies pass TLS through: the certificate names 127.0.0.1.
func (s *Stack) configureNATSCluster(bin string) error {
	c := s.opts.Chaos
	c.routes = map[[2]string]*Proxy{}
	type ports struct{ client, route, http int }
	names := []string{"nats-0", "nats-1", "nats-2"}
	p := map[string]ports{}
	for _, n := range names {
		ps, err := testenv.FreePorts(3)
		if err != nil {
			return err
		}
		p[n] = ports{ps[0], ps[1], ps[2]}
	}
	unreachable, err := testenv.FreePort()
	if err != nil {
		return err
	}
	var urls []string
	for _, n := range names {
		client, err := newProxyOnFreePort("127.0.0.1:" + strconv.Itoa(p[n].client))
		if err != nil {
			return err
		}
		urls = append(urls, "tls://"+client.Addr())
		c.nats[n] = &natsNode{client: client, health: fmt.Sprintf("http://127.0.0.1:%d/healthz", p[n].http)}
	}
	for _, from := range names {
		var routes []any
		for _, to := range names {
			if to == from {
				continue
			}
			r, err := newProxyOnFreePort("127.0.0.1:" + strconv.Itoa(p[to].route))
			if err != nil {
				return err
			}
			c.routes[[2]string{from, to}] = r
			routes = append(routes, "nats-route://"+r.Addr())
		}
		cfg := s.natsSetup.config("127.0.0.1:"+strconv.Itoa(p[from].client), "127.0.0.1:"+strconv.Itoa(p[from].http), filepath.Join(s.Dir, from))
		cfg.ServerName = from
		var conf map[string]any
		if err := json.Unmarshal(cfg.Render(), &conf); err != nil {
			return fmt.Errorf("nats configuration of %s: %w", from, err)
		}
		conf["cluster"] = map[string]any{
			"name":         "aicr-chaos",
			"listen":       "127.0.0.1:" + strconv.Itoa(p[from].route),
			"advertise":    "127.0.0.1:" + strconv.Itoa(unreachable),
			"no_advertise": true,
			"routes":       routes,
		}
		// nats-server reads JSON but not its \u escapes: keep '>' of the permissions as it is.
		var raw bytes.Buffer
		enc := json.NewEncoder(&raw)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(conf); err != nil {
			return fmt.Errorf("nats configuration of %s: %w", from, err)
		}
		path := filepath.Join(s.Dir, from+".conf")
		if err := os.WriteFile(path, raw.Bytes(), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		c.nats[from].args = []string{bin, "--config", path}
	}
	c.natsOrder = names
	s.NATSURL = strings.Join(urls, ",")
	return nil
}

// StartNATS starts a nats-server of the chaos stack (again) and waits until it is healthy.
func (s *Stack) StartNATS(ctx context.Context, name string) error {
	if err := s.spawnNATS(name); err != nil {
		return err
	}
	return s.waitNATS(ctx, name)
}

// natsBindTries is how many times a node that exits at start because one of its ports was taken
// is started again on the same ports (they are written into its peers' proxies and configs): a
// port held by another program's short connection is free again a moment later.
const natsBindTries = 5

// SpawnNATS starts a nats-server of the chaos stack (again) without waiting for it: nodes that
// need each other for a JetStream quorum start together, then WaitNATS waits for each.
func (s *Stack) SpawnNATS(name string) error { return s.spawnNATS(name) }

// WaitNATS waits until a node started by SpawnNATS is healthy (waitNATS).
func (s *Stack) WaitNATS(ctx context.Context, name string) error { return s.waitNATS(ctx, name) }

func (s *Stack) spawnNATS(name string) error {
	n, err := s.natsNode(name)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return s.spawn(name, n.args, nil)
}

// waitNATS waits until the node name is healthy, starting it again when it exited because a port
// of its was taken (natsBindTries in all).
func (s *Stack) waitNATS(ctx context.Context, name string) error {
	for try := 1; ; try++ {
		err := s.waitNATSOnce(ctx, name)
		if err == nil || !addrInUse(err) || try == natsBindTries {
			return err
		}
		fmt.Fprintf(s.log, "stack: %s could not bind a port (try %d of %d), starting it again\n", name, try, natsBindTries)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
		if err := s.spawnNATS(name); err != nil {
			return err
		}
	}
}

func (s *Stack) waitNATSOnce(ctx context.Context, name string) error {
	n, err := s.natsNode(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	exited := s.exits[name]
	s.mu.Unlock()
	return testenv.WaitFor(ctx, natsReadyTimeout, name+" ready", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, testenv.Permanent(s.exitedError(name))
		default:
		}
		return httpOK(ctx, n.health), nil
	})
}

func (s *Stack) natsNode(name string) (*natsNode, error) {
	if s.opts.Chaos == nil || s.opts.Chaos.nats[name] == nil {
		return nil, fmt.Errorf("%s is not a nats-server of a chaos stack (Options.Chaos)", name)
	}
	return s.opts.Chaos.nats[name], nil
}

// KillNATS SIGKILLs one nats-server of the chaos stack.
func (s *Stack) KillNATS(name string) error {
	if _, err := s.natsNode(name); err != nil {
		return err
	}
	return s.StopBinary(name, true)
}

// PartitionNATS cuts a cluster node off from its peers and its clients (its route and client
// proxies) as a network that drops packets does (Proxy.Silence): no connection closes, so every
// end finds out only by its own timeouts (nats.go's pings, Raft's heartbeats); HealNATS joins
// it again. The node keeps running.
func (s *Stack) PartitionNATS(name string) error { return s.cutNATS(name, true) }

// HealNATS ends PartitionNATS.
func (s *Stack) HealNATS(name string) error { return s.cutNATS(name, false) }

func (s *Stack) cutNATS(name string, cut bool) error {
	n, err := s.natsNode(name)
	if err != nil {
		return err
	}
	if n.client == nil {
		return fmt.Errorf("partition %s: only a node of a NATS cluster (NATSNodes 3) has proxies", name)
	}
	proxies := []*Proxy{n.client}
	for pair, p := range s.opts.Chaos.routes {
		if pair[0] == name || pair[1] == name {
			proxies = append(proxies, p)
		}
	}
	for _, p := range proxies {
		if cut {
			p.Silence()
		} else {
			p.Heal()
		}
	}
	return nil
}

// stopChaos closes the chaos stack's proxies and removes the audit policy.
func (s *Stack) stopChaos() {
	c := s.opts.Chaos
	if c == nil {
		return
	}
	for _, n := range c.nats {
		if n.client != nil {
			n.client.Close()
		}
	}
	for _, p := range c.routes {
		p.Close()
	}
	if c.webhook != nil {
		c.webhook.Close()
	}
	s.mu.Lock()
	proxies := c.apiProxies
	c.apiProxies = nil
	s.mu.Unlock()
	for _, p := range proxies {
		p.Close()
	}
	if c.auditDir != "" {
		os.RemoveAll(c.auditDir)
	}
}

// KillEnv SIGKILLs a process of the environment (testenv.ProcEtcd, testenv.ProcAPIServer): its
// data stays, StartEnv starts it again on its ports.
func (s *Stack) KillEnv(name string) error {
	pid := 0
	for _, p := range s.Env.Processes() {
		if p.Name == name {
			pid = p.PID
		}
	}
	if pid == 0 {
		return fmt.Errorf("kill %s: not running", name)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	return nil
}

// EnvAlive reports whether a process of the environment runs (it may be a zombie for a moment
// after a kill, until testenv reaps it).
func (s *Stack) EnvAlive(name string) bool {
	for _, p := range s.Env.Processes() {
		if p.Name == name {
			return syscall.Kill(p.PID, 0) == nil
		}
	}
	return false
}

// StartEnv starts a process killed by KillEnv on the same ports and waits until it is ready;
// for the kube-apiserver also until the port accepts the clients' connections.
func (s *Stack) StartEnv(ctx context.Context, name string) error {
	timeout := etcdReadyTimeout
	if name == testenv.ProcAPIServer {
		timeout = apiServerReadyTimeout
	}
	// The process is reaped by testenv's wait goroutine; until then StartProcess says it runs.
	err := testenv.WaitFor(ctx, apiServerKillTimeout, name+" reaped and started", func(ctx context.Context) (bool, error) {
		err := s.Env.StartProcess(ctx, name)
		if err != nil && strings.Contains(err.Error(), "still running") {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil || name != testenv.ProcAPIServer {
		return err
	}
	return testenv.WaitFor(ctx, timeout, "kube-apiserver answers", func(ctx context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.Env.APIServerURL, "https://"), time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		_, err = s.Kube.Discovery().ServerVersion()
		return err == nil, nil
	})
}

// KillAPIServer SIGKILLs the kube-apiserver (etcd keeps the data).
func (s *Stack) KillAPIServer(context.Context) error { return s.KillEnv(testenv.ProcAPIServer) }

// StartAPIServer starts the kube-apiserver killed by KillAPIServer on the same port and waits
// until it answers.
func (s *Stack) StartAPIServer(ctx context.Context) error {
	return s.StartEnv(ctx, testenv.ProcAPIServer)
}

// AuditLog is the file holding the kube-apiserver's audit events (ChaosOptions.Audit), one JSON
// object a line among its other output.
func (s *Stack) AuditLog() string { return s.Env.LogPath(testenv.ProcAPIServer) }

// LogPath is the log file of a process the stack started (an instance or a nats-server).
func (s *Stack) LogPath(name string) string { return filepath.Join(s.LogsDir(), name+".log") }

// LogsDir is the folder of every process's log, the environment's and the stack's: <name>.log.
func (s *Stack) LogsDir() string { return filepath.Join(s.Dir, "logs") }

// Signal sends sig to a process the stack started (SIGSTOP and SIGCONT pause and resume it).
func (s *Stack) Signal(name string, sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.procs[name]
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("signal %s: not running", name)
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %s %s: %w", sig, name, err)
	}
	return nil
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

// ExitStatus describes how a process that Crashed ended ("exit status 1", "signal: killed").
func (s *Stack) ExitStatus(name string) string {
	s.mu.Lock()
	cmd := s.procs[name]
	s.mu.Unlock()
	if cmd == nil || cmd.ProcessState == nil {
		return ""
	}
	return cmd.ProcessState.String()
}

var instanceSuffix = regexp.MustCompile(`-[0-9]+$`)

// BinaryOf is the binary an instance name (applier-1) runs; a binary name is its own.
func BinaryOf(instance string) string {
	if b := instanceSuffix.ReplaceAllString(instance, ""); slices.Contains(Binaries, b) {
		return b
	}
	return instance
}
