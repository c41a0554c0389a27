package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ConnectOptions say where the cluster and the registry of an environment something else runs
// are (the compose stack's cluster and registry containers, deploy/compose).
type ConnectOptions struct {
	// Kubeconfig is the path of a cluster-admin kubeconfig.
	Kubeconfig string
	// Registry is the registry as this process reaches it (nil: none).
	Registry *Registry
	// NodeName is the cluster's kwok node ("" when it has none).
	NodeName string
	// ToolsDir holds helm, which PushChart runs.
	ToolsDir string
}

// Connect returns an environment for a cluster and a registry it does not run: no process of its
// own, clients from the kubeconfig, a Dir for helm's homes and the charts it packages. Stop
// removes Dir and leaves the cluster alone.
func Connect(o ConnectOptions) (*Env, error) {
	if o.Kubeconfig == "" {
		return nil, fmt.Errorf("testenv: connect: ConnectOptions.Kubeconfig is required (a cluster-admin kubeconfig)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("testenv: connect: read kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = clientQPS, clientBurst, UserAgent
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("testenv: connect: create environment dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: connect: write owner file: %w", err)
	}
	e := &Env{Config: cfg, Kubeconfig: o.Kubeconfig, Dir: dir, APIServerURL: cfg.Host, ToolsDir: o.ToolsDir, NodeName: o.NodeName,
		Registry: o.Registry, opts: Options{}.withDefaults(), keep: keepFromEnv(), ready: map[string]readiness{},
		restart: map[string]func(context.Context) error{}}
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: connect: create kubernetes client: %w", err)
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: connect: create dynamic client: %w", err)
	}
	return e, nil
}

// PrepareArgoCD creates what Argo CD's application controller and repo-server need in the
// cluster before they start, as Start does with Options.ArgoCD: the namespace ArgoCDNamespace,
// argocd-cm (timeout.reconciliation: resync), argocd-rbac-cm, argocd-secret and the default
// AppProject. For an environment whose Argo CD runs elsewhere (the compose stack's containers).
func (e *Env) PrepareArgoCD(ctx context.Context, resync time.Duration) error {
	e.opts.ArgoCDAppResync = resync
	return e.createArgoCDObjects(ctx)
}
