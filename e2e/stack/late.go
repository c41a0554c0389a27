package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

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
	whitelist, err := ClusterResourceWhitelist()
	if err != nil {
		return err
	}
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
			"clusterResourceWhitelist": whitelist,
		},
	}}
	if _, err := s.Dynamic.Resource(testenv.AppProjectGVR).Namespace(EngineNamespace).Create(ctx, project, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create appproject: %w", err)
	}
	return nil
}

// ClusterResourceWhitelist is the chart's default engine.clusterResourceWhitelist (read from
// its values.yaml): the cluster-scoped kinds the AppProject lets the components create. The
// stack's AppProject uses it, so the example stack rolls out under the chart's default.
func ClusterResourceWhitelist() ([]any, error) {
	charts, err := ChartsDir() // <repo>/examples/charts
	if err != nil {
		return nil, err
	}
	path := filepath.Join(charts, "..", "..", "deploy", "charts", "aicr-operator", "values.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the chart's values: %w", err)
	}
	var values struct {
		Engine struct {
			ClusterResourceWhitelist []map[string]string `json:"clusterResourceWhitelist"`
		} `json:"engine"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	out := make([]any, 0, len(values.Engine.ClusterResourceWhitelist))
	for _, k := range values.Engine.ClusterResourceWhitelist {
		out = append(out, map[string]any{"group": k["group"], "kind": k["kind"]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no engine.clusterResourceWhitelist", path)
	}
	return out, nil
}
