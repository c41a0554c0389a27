package stack

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// StartArgoCD brings up what Options.DeferArgoCD left out: Argo CD's CRDs, Argo CD v3.4.2 itself
// (redis, repo-server, application-controller) and the aicr AppProject, as Up does at once
// without DeferArgoCD.
func (s *Stack) StartArgoCD(ctx context.Context) error {
	start := time.Now()
	if err := s.Env.StartArgoCD(ctx); err != nil {
		return err
	}
	if err := s.createProject(ctx); err != nil {
		return err
	}
	fmt.Fprintf(s.log, "stack: Argo CD CRDs, Argo CD and the AppProject up in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// createProject creates the AppProject the chart creates: sources limited to /charts/* and
// /wrappers/* of the registry, destinations limited to the component namespaces.
func (s *Stack) createProject(ctx context.Context) error {
	var dests []any
	for _, ns := range Namespaces(ExampleComponents()) {
		dests = append(dests, map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns})
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": Project, "namespace": EngineNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"oci://" + s.Repository + "/charts/*", "oci://" + s.Repository + "/wrappers/*"},
			"destinations":             dests,
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	if _, err := s.Dynamic.Resource(testenv.AppProjectGVR).Namespace(EngineNamespace).Create(ctx, project, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create appproject: %w", err)
	}
	return nil
}
