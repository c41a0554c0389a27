package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// chartKubeVersion is the Kubernetes version helm renders for: one the chart supports (helm
// template assumes an old one otherwise).
const chartKubeVersion = "1.34.0"

// rbacKinds are the kinds of the chart's identities and privileges, and their resources.
var rbacKinds = map[string]schema.GroupVersionResource{
	"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
	"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
}

// createIdentities creates the Helm chart's ServiceAccounts and RBAC (helm template of
// deploy/charts/aicr-operator as release aicr-operator in OperatorNamespace). The binaries
// impersonate those ServiceAccounts, so they run with exactly the chart's least privilege
// (shared/kubeaccess): a call the chart does not grant fails the e2e tests.
func (s *Stack) createIdentities(ctx context.Context) error {
	helm := filepath.Join(s.Env.ToolsDir, "helm")
	if _, err := os.Stat(helm); err != nil {
		return &testenv.MissingToolsError{Tools: []string{"helm"}}
	}
	charts, err := ChartsDir() // <repo>/examples/charts
	if err != nil {
		return err
	}
	chart := filepath.Join(charts, "..", "..", "deploy", "charts", "aicr-operator")
	mode := "static"
	if s.opts.AWSAuth != nil {
		mode = "aws"
	}
	home := filepath.Join(s.Dir, "helm-render")
	cmd := exec.CommandContext(ctx, helm, "template", "aicr-operator", chart, "--namespace", OperatorNamespace, "--kube-version", chartKubeVersion,
		"--show-only", "templates/serviceaccounts.yaml", "--show-only", "templates/rbac.yaml",
		"--set", "registry.repository="+s.Repository, "--set", "registry.auth.mode="+mode,
		"--set", "registry.auth.repoCredsSecret="+RepoCredsSecret, "--set", "engine.namespace="+EngineNamespace, "--set", "engine.project="+Project)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("render the chart's RBAC: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
	for n := 0; ; {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				if n == 0 {
					return errors.New("the chart renders no ServiceAccount or RBAC")
				}
				return nil
			}
			return fmt.Errorf("decode the chart's RBAC: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvr, ok := rbacKinds[obj.GetKind()]
		if !ok {
			return fmt.Errorf("the chart's RBAC templates render a %s %s", obj.GetKind(), obj.GetName())
		}
		ri := s.Dynamic.Resource(gvr).Namespace(obj.GetNamespace())
		if obj.GetNamespace() == "" {
			if _, err := s.Dynamic.Resource(gvr).Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		} else if _, err := ri.Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		n++
	}
}
