// Package kube is the plugin's only door to the cluster: it loads the kubeconfig the way kubectl
// does and reads and patches the operator's objects through the API server.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// ErrNoRollout means the runtime names no rollout and none was given.
var ErrNoRollout = errors.New("no rollout: the ClusterRuntime names none yet; pass a rollout name (kubectl get runtimerollouts)")

// LoadConfig loads the client configuration as kubectl does: the explicit kubeconfig file, else
// $KUBECONFIG and ~/.kube/config (or the in-cluster configuration), with context selecting a
// context of the file.
func LoadConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-aicr"
	return cfg, nil
}

// Client reads and writes the operator's objects.
type Client struct {
	// Dynamic reads ClusterRuntimes and RuntimeRollouts.
	Dynamic dynamic.Interface
	// Kube reads ConfigMaps and asks who the user is.
	Kube kubernetes.Interface
	// Namespace is the operator namespace (plans, bundles by default).
	Namespace string
}

// New builds a Client for cfg.
func New(cfg *rest.Config, namespace string) (*Client, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &Client{Dynamic: dyn, Kube: kc, Namespace: namespace}, nil
}

// Runtime gets the ClusterRuntime (always named "cluster").
func (c *Client) Runtime(ctx context.Context) (*v1alpha1.ClusterRuntime, error) {
	u, err := c.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).Get(ctx, v1alpha1.RuntimeName, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get clusterruntime %s: not found; create it first (examples/clusterruntime.yaml)", v1alpha1.RuntimeName)
		}
		return nil, fmt.Errorf("get clusterruntime %s: %w", v1alpha1.RuntimeName, err)
	}
	var rt v1alpha1.ClusterRuntime
	if err := fromUnstructured(u, &rt); err != nil {
		return nil, fmt.Errorf("read clusterruntime %s: %w", v1alpha1.RuntimeName, err)
	}
	return &rt, nil
}

// Rollout gets a RuntimeRollout by name.
func (c *Client) Rollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	u, err := c.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get runtimerollout %s: not found (kubectl get runtimerollouts lists them)", name)
		}
		return nil, fmt.Errorf("get runtimerollout %s: %w", name, err)
	}
	var ro v1alpha1.RuntimeRollout
	if err := fromUnstructured(u, &ro); err != nil {
		return nil, fmt.Errorf("read runtimerollout %s: %w", name, err)
	}
	return &ro, nil
}

// CurrentRollout resolves name, or the rollout the runtime names when name is empty.
func (c *Client) CurrentRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	if name == "" {
		rt, err := c.Runtime(ctx)
		if err != nil {
			return nil, err
		}
		if rt.Status.Rollout == "" {
			return nil, ErrNoRollout
		}
		name = rt.Status.Rollout
	}
	return c.Rollout(ctx, name)
}

// PatchRolloutSpec merge-patches a rollout's spec, guarded by the resourceVersion it was read at:
// a concurrent change fails with a conflict instead of being overwritten.
func (c *Client) PatchRolloutSpec(ctx context.Context, ro *v1alpha1.RuntimeRollout, spec map[string]any) (*v1alpha1.RuntimeRollout, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": ro.ResourceVersion},
		"spec":     spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encode patch of runtimerollout %s: %w", ro.Name, err)
	}
	u, err := c.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).Patch(ctx, ro.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("patch runtimerollout %s: it changed while we wrote; run the command again: %w", ro.Name, err)
		}
		return nil, fmt.Errorf("patch runtimerollout %s: %w", ro.Name, err)
	}
	var out v1alpha1.RuntimeRollout
	if err := fromUnstructured(u, &out); err != nil {
		return nil, fmt.Errorf("read runtimerollout %s: %w", ro.Name, err)
	}
	return &out, nil
}

// WhoAmI returns the user name the API server authenticates this client as (a SelfSubjectReview).
func (c *Client) WhoAmI(ctx context.Context) (string, error) {
	res, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("ask the API server who you are (SelfSubjectReview): %w", err)
	}
	if res.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("ask the API server who you are (SelfSubjectReview): no user name in the answer")
	}
	return res.Status.UserInfo.Username, nil
}

// Plan reads a plan by digest ("sha256:<hex>") or ConfigMap name ("aicr-plan-<hex>"), verifying
// its content against the digest.
func (c *Client) Plan(ctx context.Context, ref string) (*plan.Plan, *corev1.ConfigMap, error) {
	name := ref
	if strings.HasPrefix(ref, "sha256:") {
		name = plan.ConfigMapName(ref)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("get plan %s: ConfigMap %s/%s not found (is --operator-namespace right?)", ref, c.Namespace, name)
		}
		return nil, nil, fmt.Errorf("get plan %s: %w", ref, err)
	}
	p, err := plan.FromConfigMap(cm)
	if err != nil {
		return nil, nil, err
	}
	return p, cm, nil
}

// Bundle reads the bundle document a runtime points at.
func (c *Client) Bundle(ctx context.Context, rt *v1alpha1.ClusterRuntime) ([]byte, error) {
	src := rt.Spec.Bundle.ConfigMap
	if src == nil {
		return nil, fmt.Errorf("read bundle: spec.bundle.configMap is not set on clusterruntime %s", rt.Name)
	}
	ns, key := src.Location(c.Namespace)
	cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, src.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read bundle ConfigMap %s/%s: %w", ns, src.Name, err)
	}
	data, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("read bundle ConfigMap %s/%s: key %q is missing", ns, src.Name, key)
	}
	return []byte(data), nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), into)
}
