package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// AttachOptions configure Attach.
type AttachOptions struct {
	// Repository is registry-host/RepositoryPath as Argo CD and the binaries reach the registry
	// (registry:5000/aicr in deploy/compose), which may differ from env.Registry.Host, where
	// this process pushes.
	Repository string
	// BinDir holds kubectl-aicr (KubectlAICR).
	BinDir string
	// Log receives progress lines; os.Stderr when nil.
	Log io.Writer
}

// Attach makes a Stack of a cluster and a registry something else runs (testenv.Connect), with
// binaries it does not start (the compose stack, deploy/compose): it pushes the example charts
// and creates what Up creates before the binaries start (the namespaces, the AppProject, the
// repo-creds and repository Secrets, the GPU node's label, the chart's ServiceAccounts and RBAC).
// Down removes only the Stack's own folder.
func Attach(ctx context.Context, env *testenv.Env, o AttachOptions) (*Stack, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if env.Registry == nil || o.Repository == "" {
		return nil, fmt.Errorf("stack: attach: the environment's registry and AttachOptions.Repository are required")
	}
	start := time.Now()
	s, err := attach(env, Options{BinDir: o.BinDir, Log: o.Log})
	if err != nil {
		return nil, err
	}
	s.Repository = o.Repository
	if err := s.pushCharts(ctx); err != nil {
		return nil, err
	}
	if err := s.prepareCluster(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "stack: example charts pushed, cluster prepared in %s\n", time.Since(start).Round(100*time.Millisecond))
	return s, nil
}
