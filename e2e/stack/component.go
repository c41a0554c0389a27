package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// AppProjectGVR is Argo CD's AppProject resource.
var AppProjectGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}

// chartName is the name line of a Chart.yaml.
var chartName = regexp.MustCompile(`(?m)^name:.*$`)

// AddComponent makes a new component usable in a bundle, as an operator would for a chart the
// example does not have: it pushes a copy of the example chart from (a component of
// ExampleComponents) renamed to c.Name under c.Dir, records its digest in s.Digests, creates
// c.Namespace, adds it to the AppProject's destinations and creates the chart's repository
// Secret. It is idempotent. The caller adds c to the bundle it renders.
func (s *Stack) AddComponent(ctx context.Context, c ExampleComponent, from string) error {
	var src *ExampleComponent
	for _, e := range ExampleComponents() {
		if e.Name == from {
			src = &e
			break
		}
	}
	if src == nil {
		return fmt.Errorf("add component %s: %q is not an example component", c.Name, from)
	}
	root, err := ChartsDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "charts-extra", c.Name)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("add component %s: %w", c.Name, err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, src.Dir, src.Name))); err != nil {
		return fmt.Errorf("add component %s: copy chart %s: %w", c.Name, from, err)
	}
	meta := filepath.Join(dir, "Chart.yaml")
	raw, err := os.ReadFile(meta)
	if err != nil {
		return fmt.Errorf("add component %s: %w", c.Name, err)
	}
	if err := os.WriteFile(meta, chartName.ReplaceAll(raw, []byte("name: "+c.Name)), 0o644); err != nil {
		return fmt.Errorf("add component %s: %w", c.Name, err)
	}
	return s.AddChart(ctx, c, dir)
}

// AddChart makes a component of the chart in dir (its Chart.yaml names it c.Name) usable in a
// bundle: it pushes the chart under c.Dir, records its digest in s.Digests, creates
// c.Namespace, adds it to the AppProject's destinations and creates the chart's repository
// Secret. It is idempotent. The caller adds c to the bundle it renders.
func (s *Stack) AddChart(ctx context.Context, c ExampleComponent, dir string) error {
	ch, err := s.Env.PushChart(ctx, dir, RepositoryPath+"/"+c.Dir)
	if err != nil {
		return fmt.Errorf("add component %s: push chart: %w", c.Name, err)
	}
	s.mu.Lock()
	s.Digests[c.Name] = ch.Digest
	s.mu.Unlock()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}
	if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("add component %s: create namespace %s: %w", c.Name, c.Namespace, err)
	}
	if err := s.AllowDestination(ctx, c.Namespace); err != nil {
		return fmt.Errorf("add component %s: %w", c.Name, err)
	}
	return s.Env.CreateOCIRepoSecret(ctx, "aicr-repo-"+c.Name, "oci://"+s.Repository+"/"+c.Dir+"/"+c.Name)
}

// AllowDestination adds namespace (on the in-cluster server) to the AppProject's destinations,
// as the chart does for every component namespace. It is idempotent.
func (s *Stack) AllowDestination(ctx context.Context, namespace string) error {
	projects := s.Dynamic.Resource(AppProjectGVR).Namespace(EngineNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := projects.Get(ctx, Project, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get appproject %s: %w", Project, err)
		}
		dests, _, err := unstructured.NestedSlice(p.Object, "spec", "destinations")
		if err != nil {
			return fmt.Errorf("read appproject %s destinations: %w", Project, err)
		}
		for _, d := range dests {
			if m, ok := d.(map[string]any); ok && m["namespace"] == namespace {
				return nil
			}
		}
		dests = append(dests, map[string]any{"server": "https://kubernetes.default.svc", "namespace": namespace})
		if err := unstructured.SetNestedSlice(p.Object, dests, "spec", "destinations"); err != nil {
			return err
		}
		if _, err := projects.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update appproject %s: %w", Project, err)
		}
		return nil
	})
}
