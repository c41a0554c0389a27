package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// Names used by the stack.
const (
	OperatorNamespace = "aicr-system"
	EngineNamespace   = testenv.ArgoCDNamespace
	Project           = "aicr"
	RepoCredsSecret   = v1alpha1.DefaultRepoCredsSecret
	BundleConfigMap   = "aicr-bundle"
	// RepositoryPath is the path under the registry host where charts/ and wrappers/ live.
	RepositoryPath = "aicr"
	// GPUNodeLabel marks GPU nodes; the demo's accelerated placement selects it.
	GPUNodeLabel = "nvidia.com/gpu.present"
)

// Binaries are the five services, in start order.
var Binaries = []string{v1alpha1.BinaryAdmission, v1alpha1.BinaryCredRefresher, v1alpha1.BinaryReadiness, v1alpha1.BinaryApplier, v1alpha1.BinaryPlanner}

// Options configure Up.
type Options struct {
	// BinDir holds the five binaries (make build puts them in bin/).
	BinDir string
	// Log receives progress lines; os.Stderr when nil.
	Log io.Writer
	// ExtraFlags are appended to a binary's flags, by binary name.
	ExtraFlags map[string][]string
	// DeferArgoCD starts the stack without Argo CD, its CRDs and the AppProject, so the operator
	// finds the engine missing; Stack.StartArgoCD brings them up later (late.go).
	DeferArgoCD bool
	// AWSAuth, when set, runs credrefresher in aws mode against a fake ECR endpoint (credentials.go).
	AWSAuth *AWSAuth
	// Chaos, when set, runs NATS as a process and no Argo CD, for fault injection (chaos.go).
	Chaos *ChaosOptions
	// AnonymousRegistry runs the registry without authentication and gives Argo CD only the
	// repo-creds Secret, as the specification's snippet creates it for static mode: an empty
	// username and password, and no per-chart repository Secret.
	AnonymousRegistry bool
	// Launch, when set, says how each binary starts: it gets the binary's name, its command line
	// (its path in BinDir, then the chart's flags) and environment (nil: the test's own), and
	// returns those to run; e2e/imagebuild runs each binary from its image's root filesystem.
	// BinDir need not hold the binaries then.
	Launch func(binary string, argv, env []string) ([]string, []string, error)
}

// Stack is a running local stack.
type Stack struct {
	Env     *testenv.Env
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Operator reads and writes ClusterRuntimes and RuntimeRollouts (shared/runtimeclient).
	Operator   *runtimeclient.Client
	Repository string // 127.0.0.1:<port>/aicr
	Digests    map[string]string
	NATSURL    string
	Dir        string

	opts      Options
	nats      *server.Server
	natsSetup *natsSetup
	mu        sync.Mutex
	procs     map[string]*exec.Cmd
	exits     map[string]chan struct{}
	log       io.Writer
	hookPort  int
}

// Up starts everything and pushes the example charts. It does not apply a ClusterRuntime.
func Up(ctx context.Context, o Options) (s *Stack, err error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	for _, b := range Binaries {
		if o.Launch != nil {
			break
		}
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("binary %s not in %s (run make build): %w", b, o.BinDir, err)
		}
	}
	if o.Chaos != nil {
		return upChaos(ctx, o)
	}
	start := time.Now()
	auth := o.registryAuth()
	env, err := testenv.Start(testenv.Options{Kwok: true, ArgoCD: !o.DeferArgoCD, SkipArgoCRDs: o.DeferArgoCD, Registry: true, RegistryAuth: auth, Log: o.Log, ArgoCDAppResync: 30 * time.Second})
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
	fmt.Fprintf(o.Log, "stack: kubernetes, kwok, Argo CD and the registry up in %s\n", time.Since(start).Round(100*time.Millisecond))
	s.Repository = env.Registry.Host + "/" + RepositoryPath
	if err := s.pushCharts(ctx); err != nil {
		return s, err
	}
	if err := s.prepareCluster(ctx); err != nil {
		return s, err
	}
	if err := s.prepareCredentials(ctx); err != nil {
		return s, err
	}
	if s.natsSetup, err = newNATSSetup(env.Dir); err != nil {
		return s, err
	}
	if s.nats, err = s.natsSetup.startEmbedded(env.Dir); err != nil {
		return s, err
	}
	s.NATSURL = s.nats.ClientURL()
	if s.hookPort, err = testenv.FreePort(); err != nil {
		return s, err
	}
	if err := s.startBinaries(ctx); err != nil {
		return s, err
	}
	fmt.Fprintf(o.Log, "stack: operator up in %s (nats %s)\n", time.Since(start).Round(100*time.Millisecond), s.NATSURL)
	return s, nil
}

func (s *Stack) pushCharts(ctx context.Context) error {
	root, err := ChartsDir()
	if err != nil {
		return err
	}
	s.Digests = map[string]string{}
	for _, c := range ExampleComponents() {
		ch, err := s.Env.PushChart(ctx, filepath.Join(root, c.Dir, c.Name), RepositoryPath+"/"+c.Dir)
		if err != nil {
			return fmt.Errorf("push chart %s: %w", c.Name, err)
		}
		s.Digests[c.Name] = ch.Digest
	}
	return nil
}

// attach wraps a started environment in a Stack with its clients. The Stack is returned even
// on error, so the caller's Down stops the environment.
func attach(env *testenv.Env, o Options) (*Stack, error) {
	s := &Stack{Env: env, Dir: env.Dir, opts: o, procs: map[string]*exec.Cmd{}, exits: map[string]chan struct{}{}, log: o.Log}
	var err error
	if s.Kube, err = kubernetes.NewForConfig(env.Config); err != nil {
		return s, fmt.Errorf("create kubernetes client: %w", err)
	}
	if s.Dynamic, err = dynamic.NewForConfig(env.Config); err != nil {
		return s, fmt.Errorf("create dynamic client: %w", err)
	}
	if s.Operator, err = runtimeclient.NewForConfig(env.Config); err != nil {
		return s, err
	}
	return s, nil
}

// prepareCluster creates what the Helm chart creates: the operator and component namespaces,
// the AppProject, the repo-creds Secret (static mode), and identities for the binaries.
func (s *Stack) prepareCluster(ctx context.Context) error {
	nss := append([]string{OperatorNamespace, EngineNamespace}, Namespaces(ExampleComponents())...)
	for _, ns := range nss {
		_, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if !s.opts.DeferArgoCD {
		if err := s.createProject(ctx); err != nil {
			return err
		}
	}
	// The repo-creds Secret the chart documents for registry.auth static: the admin's
	// credentials for every chart under registry.repository (empty for an anonymous registry).
	user, password := "", ""
	if a := s.Env.Registry.Auth; a != nil {
		user, password = a.Username, a.Password
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RepoCredsSecret, Namespace: EngineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: map[string]string{
			"type": "oci", "url": "oci://" + s.Repository, "insecureOCIForceHttp": "true",
			"username": user, "password": password,
		},
	}
	if _, err := s.Kube.CoreV1().Secrets(EngineNamespace).Create(ctx, creds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create repo-creds secret: %w", err)
	}
	if s.opts.AnonymousRegistry {
		return s.labelGPUNodeAndIdentities(ctx) // Argo CD inherits insecureOCIForceHttp from repo-creds
	}
	// One repository Secret per chart as well: the local registry is plain HTTP, which Argo CD
	// v3.4.2 honours per repository (insecureOCIForceHttp).
	for _, c := range ExampleComponents() {
		if err := s.Env.CreateOCIRepoSecret(ctx, "aicr-repo-"+c.Name, "oci://"+s.Repository+"/"+c.Dir+"/"+c.Name); err != nil {
			return err
		}
	}
	return s.labelGPUNodeAndIdentities(ctx)
}

// labelGPUNodeAndIdentities labels the GPU node and creates the binaries' identities.
func (s *Stack) labelGPUNodeAndIdentities(ctx context.Context) error {
	// kwok's node plays a GPU node, so the accelerated placement has somewhere to land.
	if s.Env.NodeName != "" {
		patch := []byte(`{"metadata":{"labels":{"` + GPUNodeLabel + `":"true"}}}`)
		if _, err := s.Kube.CoreV1().Nodes().Patch(ctx, s.Env.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", s.Env.NodeName, err)
		}
	}
	return s.createIdentities(ctx)
}

// Identity is the username a binary acts as.
func Identity(binary string) string {
	return v1alpha1.ServiceAccountUser(OperatorNamespace, binary)
}

func (s *Stack) kubeconfigFor(instance string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(s.Env.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("read kubeconfig: %w", err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = Identity(BinaryOf(instance))
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + OperatorNamespace, "system:authenticated"}
		if s.opts.Chaos != nil {
			ai.ImpersonateUserExtra = map[string][]string{InstanceExtra: {instance}}
		}
	}
	if c := s.opts.Chaos; c != nil && c.APIProxies {
		p, ca, err := s.apiProxyFor(instance)
		if err != nil {
			return "", err
		}
		for _, cl := range cfg.Clusters {
			cl.Server, cl.CertificateAuthority, cl.CertificateAuthorityData = p.URL(), "", ca
		}
	}
	path := filepath.Join(s.Dir, "kubeconfig-"+instance)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// Flags returns the flags an instance of a binary (Instances) runs with: the same ones the Helm
// chart passes.
func (s *Stack) Flags(instance string, healthPort, metricsPort int) ([]string, error) {
	binary := BinaryOf(instance)
	kc, err := s.kubeconfigFor(instance)
	if err != nil {
		return nil, err
	}
	common := append([]string{"--nats-url=" + s.NATSURL}, s.natsSetup.natsFlags(binary)...)
	common = append(common, "--kubeconfig="+kc, "--namespace="+OperatorNamespace,
		"--health-addr=127.0.0.1:"+strconv.Itoa(healthPort), "--metrics-addr=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--log-format=json", "--log-level=info")
	var own []string
	switch binary {
	case v1alpha1.BinaryPlanner:
		own = []string{"--operator-identities=" + operatorIdentities(), "--engine-namespace=" + EngineNamespace, "--repo-creds-secret=" + RepoCredsSecret, "--leader-elect",
			"--engine-project=" + Project, "--registry-repository=" + s.Repository}
	case v1alpha1.BinaryApplier:
		own = []string{"--engine-namespace=" + EngineNamespace, "--engine-project=" + Project, "--registry-repository=" + s.Repository, "--workers=8"}
	case v1alpha1.BinaryReadiness:
		// The chart passes --registry-repository to readiness too: without it drift is not checked.
		own = []string{"--engine-namespace=" + EngineNamespace, "--engine-project=" + Project, "--registry-repository=" + s.Repository, "--leader-elect"}
	case v1alpha1.BinaryCredRefresher:
		own = []string{"--registry-auth=static", "--registry-repository=" + s.Repository, "--engine-namespace=" + EngineNamespace, "--repo-creds-secret=" + RepoCredsSecret, "--leader-elect"}
	case v1alpha1.BinaryAdmission:
		certFile, keyFile, err := s.webhookCert()
		if err != nil {
			return nil, err
		}
		own = []string{"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile, "--operator-identities=" + operatorIdentities(),
			"--engine-namespace=" + EngineNamespace, "--webhook-addr=" + s.webhookAddr(instance)}
	}
	// An instance of its own name (planner-1, a chaos stack's replicas or a test's second
	// replica) elects with that name: the default, the host name, is every process's here.
	if slices.Contains(own, "--leader-elect") && (s.opts.Chaos != nil || instance != binary) {
		own = append(own, "--identity="+instance)
	}
	if c := s.opts.Chaos; c != nil {
		if c.NATSNodes == 3 {
			own = append(own, "--stream-replicas=3")
		}
	}
	return append(append(common, own...), s.opts.ExtraFlags[binary]...), nil
}

func operatorIdentities() string {
	return strings.Join(v1alpha1.OperatorIdentities(OperatorNamespace), ",")
}

// Instances lists the processes of a binary: the binary's own name, or in a chaos stack
// <binary>-0 ... <binary>-<n-1> for ChaosOptions.Replicas n (default 1).
func (s *Stack) Instances(binary string) []string {
	if s.opts.Chaos == nil {
		return []string{binary}
	}
	n := max(1, s.opts.Chaos.Replicas[binary])
	out := make([]string, n)
	for i := range out {
		out[i] = binary + "-" + strconv.Itoa(i)
	}
	return out
}

func (s *Stack) startBinaries(ctx context.Context) error {
	for _, b := range Binaries {
		for _, name := range s.Instances(b) {
			if err := s.StartBinary(ctx, name); err != nil {
				return err
			}
		}
	}
	return s.registerWebhook(ctx)
}

// StartBinary starts one binary (or instance, Instances) and waits until its /readyz answers 200.
func (s *Stack) StartBinary(ctx context.Context, name string) error {
	return s.StartBinaryWith(ctx, name)
}

// StartBinaryWith starts an instance of a binary as StartBinary does, with env added to its
// environment (KEY=value): a test-only setting such as the planner's AICR_TEST_CLOCK_OFFSET.
// name may be an instance Instances does not list (planner-1 beside planner: a second
// replica, electing under its own name); the test stops it (StopBinary), StopBinaries does not.
func (s *Stack) StartBinaryWith(ctx context.Context, name string, env ...string) error {
	ports, err := testenv.FreePorts(2)
	if err != nil {
		return err
	}
	args, err := s.Flags(name, ports[0], ports[1])
	if err != nil {
		return err
	}
	argv, penv := append([]string{filepath.Join(s.opts.BinDir, BinaryOf(name))}, args...), s.binaryEnv(BinaryOf(name))
	if c := s.opts.Chaos; c != nil {
		env = append(slices.Clone(c.Env[name]), env...)
	}
	if len(env) > 0 {
		if penv == nil {
			penv = os.Environ()
		}
		penv = append(slices.Clone(penv), env...)
	}
	env = penv
	if s.opts.Launch != nil {
		if argv, env, err = s.opts.Launch(BinaryOf(name), argv, env); err != nil {
			return fmt.Errorf("launch %s: %w", name, err)
		}
	}
	if err := s.spawn(name, argv, env); err != nil {
		return err
	}
	s.mu.Lock()
	cmd, exited := s.procs[name], s.exits[name]
	s.mu.Unlock()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0])
	err = testenv.WaitFor(ctx, 2*time.Minute, name+" ready", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, testenv.Permanent(s.exitedError(name))
		default:
		}
		return httpOK(ctx, url), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.log, "stack: %s ready (pid %d, log %s)\n", name, cmd.Process.Pid, s.LogPath(name))
	return nil
}

// exitLogLines is how much of a process's log the error of a start that failed quotes: the
// folder with the log is gone once the test has ended.
const exitLogLines = 30

// exitedError says that the process name exited before it was ready, how, and how its log ends.
func (s *Stack) exitedError(name string) error {
	return &exitedError{name: name, status: s.ExitStatus(name), log: s.LogPath(name), tail: string(testenv.TailFile(s.LogPath(name), exitLogLines))}
}

type exitedError struct{ name, status, log, tail string }

func (e *exitedError) Error() string {
	return fmt.Sprintf("%s exited before it was ready (%s); the last lines of %s:\n%s", e.name, e.status, e.log, e.tail)
}

// addrInUse reports whether err is a process's exit at start because a port it was given was
// taken by then (by another program's connection or listener).
func addrInUse(err error) bool {
	var e *exitedError
	return errors.As(err, &e) && testenv.AddrInUse([]byte(e.tail))
}

// spawn starts a process of the stack named name with its output appended to its log, in its
// own process group, killed with the test binary.
func (s *Stack) spawn(name string, argv, env []string) error {
	logPath := s.LogPath(name)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.procs[name], s.exits[name] = cmd, exited
	s.mu.Unlock()
	return nil
}

// StopBinary stops one binary (or instance, or a chaos stack's nats-server): SIGTERM, or SIGKILL
// when kill. A paused process is resumed first, so SIGTERM can end it.
func (s *Stack) StopBinary(binary string, kill bool) error {
	s.mu.Lock()
	cmd, exited := s.procs[binary], s.exits[binary]
	delete(s.procs, binary)
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	select {
	case <-exited:
		return nil
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("%s did not stop within 15s of %s; killed", binary, sig)
	}
}

// StopBinaries stops every instance of the five binaries with SIGTERM, in reverse start order,
// and leaves the rest of the stack (and the logs) in place. Down does it first.
func (s *Stack) StopBinaries() error {
	var errs []error
	for i := len(Binaries) - 1; i >= 0; i-- {
		for _, name := range s.Instances(Binaries[i]) {
			if err := s.StopBinary(name, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Down stops the binaries, NATS and the environment.
func (s *Stack) Down() error {
	var errs []error
	if err := s.StopBinaries(); err != nil {
		errs = append(errs, err)
	}
	s.stopCredentials()
	for _, name := range s.NATSNodes() { // the nats-server processes of a chaos stack
		if err := s.StopBinary(name, false); err != nil {
			errs = append(errs, err)
		}
	}
	s.stopChaos()
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	if s.Env != nil {
		if err := s.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Stack) webhookPort() int { return s.hookPort }

// webhookAddr is where an admission instance listens: the webhook port, or behind a chaos
// stack's webhook proxy a backend port of its own.
func (s *Stack) webhookAddr(instance string) string {
	if c := s.opts.Chaos; c != nil && c.webhook != nil {
		i := slices.Index(s.Instances("admission"), instance)
		return c.webhook.backends[i]
	}
	return fmt.Sprintf("127.0.0.1:%d", s.webhookPort())
}

// webhookCert writes a CA-signed serving certificate for 127.0.0.1 (once) and returns the paths.
func (s *Stack) webhookCert() (string, string, error) {
	certFile, keyFile := filepath.Join(s.Dir, "webhook.crt"), filepath.Join(s.Dir, "webhook.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	ca, err := tlstest.NewCA("aicr-webhook-ca")
	if err != nil {
		return "", "", fmt.Errorf("create webhook CA: %w", err)
	}
	srv, err := ca.Server("aicr-admission")
	if err != nil {
		return "", "", fmt.Errorf("create webhook certificate: %w", err)
	}
	for path, data := range map[string][]byte{certFile: srv.CertPEM, keyFile: srv.KeyPEM, filepath.Join(s.Dir, "webhook-ca.crt"): ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", err
		}
	}
	return certFile, keyFile, nil
}

// registerWebhook points a ValidatingWebhookConfiguration at the admission binary, as the chart
// does: Applications in the engine namespace, the operator's resources, plan ConfigMaps.
func (s *Stack) registerWebhook(ctx context.Context) error {
	ca, err := os.ReadFile(filepath.Join(s.Dir, "webhook-ca.crt"))
	if err != nil {
		return fmt.Errorf("read webhook CA: %w", err)
	}
	return s.RegisterWebhook(ctx, fmt.Sprintf("https://127.0.0.1:%d/validate", s.webhookPort()), ca)
}

// RegisterWebhook creates the chart's ValidatingWebhookConfiguration with the admission webhook
// at url, its serving certificate signed by ca (PEM).
func (s *Stack) RegisterWebhook(ctx context.Context, url string, ca []byte) error {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	hook := func(name, group, resource string, nsSel *metav1.LabelSelector, objSel *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{"v1alpha1", "v1"}, Resources: []string{resource}}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: nsSel, ObjectSelector: objSel,
		}
	}
	engineNS := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": EngineNamespace}}
	operatorNS := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": OperatorNamespace}}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("applications.operator.aicr.run", "argoproj.io", "applications", engineNS, nil),
			hook("runtimerollouts.operator.aicr.run", v1alpha1.Group, "runtimerollouts", nil, nil),
			hook("clusterruntimes.operator.aicr.run", v1alpha1.Group, "clusterruntimes", nil, nil),
			hook("plans.operator.aicr.run", "", "configmaps", operatorNS,
				&metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelRole: v1alpha1.PlanRoleValue}}),
		},
	}
	_, err := s.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register webhook: %w", err)
	}
	return nil
}
