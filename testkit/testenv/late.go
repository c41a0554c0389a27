package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StartArgoCD starts Argo CD v3.4.2 in an environment started without it (Options.ArgoCD false,
// typically with SkipArgoCRDs), for tests of a controller that finds Argo CD missing and then
// sees it appear. It installs Argo CD's CRDs (a no-op when they are there), creates what Start
// creates with Options.ArgoCD (the namespace, argocd-cm, argocd-rbac-cm, argocd-secret, the
// default AppProject) and starts redis, the repo-server and the application-controller, waiting
// until each is ready. Env.ArgoCD is set afterwards. The processes stop with Stop, like the rest.
func (e *Env) StartArgoCD(ctx context.Context) error {
	if e.ArgoCD != nil {
		return errors.New("testenv: start argocd: already running")
	}
	var missing []string
	for _, b := range []string{"argocd", "redis-server", "helm"} {
		if _, err := os.Stat(filepath.Join(e.ToolsDir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return &MissingToolsError{Tools: toolsOf(missing), Binaries: missing, Dir: e.ToolsDir}
	}
	if err := e.InstallArgoCRDs(ctx); err != nil {
		return fmt.Errorf("testenv: start argocd: %w", err)
	}
	if err := e.startArgoCD(ctx); err != nil {
		return fmt.Errorf("testenv: start argocd: %w", err)
	}
	return nil
}
