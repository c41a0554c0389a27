package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/shared/plan"
)

// ExampleComponent describes one component of the example GPU-stack bundle.
type ExampleComponent struct {
	Name          string
	Dir           string // charts or wrappers
	Namespace     string
	DependsOn     []string
	ReadinessGate bool
	Values        map[string]any
	Placement     *plan.ComponentPlacement
}

// ExampleComponents is the GPU-stack-shaped example: the real components' names and dependency
// shape, small charts from examples/charts.
func ExampleComponents() []ExampleComponent {
	return []ExampleComponent{
		{Name: "cert-manager", Dir: "charts", Namespace: "cert-manager", Values: map[string]any{"replicas": 1}},
		{Name: "nfd", Dir: "charts", Namespace: "node-feature-discovery", Values: map[string]any{"replicas": 1},
			Placement: &plan.ComponentPlacement{Class: plan.PlacementSystem, NodeSelectorPaths: []string{"nodeSelector"}, TolerationsPaths: []string{"tolerations"}}},
		{Name: "kube-prometheus-stack", Dir: "charts", Namespace: "monitoring", Values: map[string]any{"replicas": 1, "logLevel": "info"}},
		{Name: "nodewright-customizations", Dir: "charts", Namespace: "nodewright", DependsOn: []string{"nfd"}, Values: map[string]any{"replicas": 1}},
		{Name: "gpu-operator", Dir: "charts", Namespace: "gpu-operator",
			DependsOn: []string{"cert-manager", "kube-prometheus-stack", "nfd", "nodewright-customizations"},
			Values:    map[string]any{"replicas": 1, "driver": map[string]any{"version": "580.95.05"}, "daemonsets": map[string]any{"nodeSelector": map[string]any{}, "tolerations": []any{}}},
			Placement: &plan.ComponentPlacement{Class: plan.PlacementAccelerated, NodeSelectorPaths: []string{"daemonsets.nodeSelector"}, TolerationsPaths: []string{"daemonsets.tolerations"}}},
		{Name: "gpu-operator-readiness", Dir: "charts", Namespace: "gpu-operator", DependsOn: []string{"gpu-operator"}, ReadinessGate: true,
			Values: map[string]any{"target": "gpu-operator"}},
		{Name: "jobset", Dir: "charts", Namespace: "jobset-system", DependsOn: []string{"cert-manager"}, Values: map[string]any{"replicas": 1}},
		{Name: "kubeflow-trainer", Dir: "charts", Namespace: "kubeflow-system", DependsOn: []string{"cert-manager", "jobset"}, Values: map[string]any{"replicas": 1}},
		{Name: "dcgm-exporter", Dir: "wrappers", Namespace: "dcgm-exporter", DependsOn: []string{"gpu-operator-readiness"}, Values: map[string]any{"replicas": 1}},
	}
}

// Namespaces returns the components' namespaces, sorted and unique.
func Namespaces(cs []ExampleComponent) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cs {
		if !seen[c.Namespace] {
			seen[c.Namespace] = true
			out = append(out, c.Namespace)
		}
	}
	sort.Strings(out)
	return out
}

// BundleYAML renders a bundle of cs with the pushed charts' digests.
func BundleYAML(name, version string, cs []ExampleComponent, digests map[string]string) ([]byte, error) {
	b := plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: name, Version: version}}
	for _, c := range cs {
		d, ok := digests[c.Name]
		if !ok {
			return nil, fmt.Errorf("render bundle: chart %s was not pushed", c.Name)
		}
		raw, err := yaml.Marshal(c.Values)
		if err != nil {
			return nil, fmt.Errorf("render bundle: values of %s: %w", c.Name, err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("render bundle: values of %s: %w", c.Name, err)
		}
		b.Components = append(b.Components, plan.Component{
			Name: c.Name, Chart: plan.ChartRef{Path: c.Dir + "/" + c.Name, Digest: d}, Namespace: c.Namespace,
			DependsOn: c.DependsOn, ReadinessGate: c.ReadinessGate, Values: js, Placement: c.Placement,
		})
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("render bundle: %w", err)
	}
	return yaml.Marshal(b)
}

// ChartsDir finds examples/charts from the working directory up.
func ChartsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "examples", "charts")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("examples/charts not found above the working directory")
		}
		dir = parent
	}
}
