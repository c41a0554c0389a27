// Package kube is the plugin's only door to the cluster: it reads, watches and patches the
// operator's objects through the API server, the ClusterRuntime and the RuntimeRollouts with
// shared/runtimeclient, the typed client every binary uses. The client configuration comes from
// kubectl's flags (k8s.io/cli-runtime), built by the caller.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
)

// ErrNoRollout means the runtime names no rollout and none was given.
var ErrNoRollout = errors.New("no rollout: the ClusterRuntime names none yet; pass a rollout name (kubectl get runtimerollouts)")

// Runtime is the ClusterRuntime as read.
type Runtime struct {
	*v1alpha1.ClusterRuntime
}

// Raw is the runtime as -o json|yaml and the templates print it: unstructured, with its
// apiVersion and kind.
func (r *Runtime) Raw() *unstructured.Unstructured {
	return toUnstructured(r.ClusterRuntime, v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.KindClusterRuntime))
}

// Rollout is a RuntimeRollout as read.
type Rollout struct {
	*v1alpha1.RuntimeRollout
}

// Raw is the rollout as -o json|yaml and the templates print it: unstructured, with its
// apiVersion and kind, and every step its Status.Steps holds (the Client's reads hold them all;
// status.stepRecords still says where they are kept).
func (r *Rollout) Raw() *unstructured.Unstructured {
	return toUnstructured(r.RuntimeRollout, v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.KindRuntimeRollout))
}

// toUnstructured converts one of the operator's objects for output. The types hold nothing the
// converter refuses (TestRawIsWhatTheAPIServerSent), so an error is a programming error.
func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(fmt.Sprintf("convert %s for output: %v", gvk.Kind, err))
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// Client reads and writes the operator's objects.
type Client struct {
	// Operator reads and writes ClusterRuntimes and RuntimeRollouts.
	Operator *runtimeclient.Client
	// Dynamic reads Argo CD's Applications.
	Dynamic dynamic.Interface
	// Kube reads ConfigMaps and Deployments and asks who the user is.
	Kube kubernetes.Interface
	// Namespace is the operator namespace (plans, bundles by default, the operator's Deployments).
	Namespace string

	steps stepConfigMaps
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
	op, err := runtimeclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{Operator: op, Dynamic: dyn, Kube: kc, Namespace: namespace}, nil
}

// ErrRuntimeNotFound is wrapped by Runtime when the ClusterRuntime does not exist.
var ErrRuntimeNotFound = errors.New("not found; create it first (examples/clusterruntime.yaml)")

// ErrCRDsMissing is wrapped by the reads of the operator's objects when the API server does not
// serve their resource: the CRDs are not installed.
var ErrCRDsMissing = errors.New("the operator's CRDs are not installed (install the chart; kubectl aicr check lists what is missing)")

// notServed says whether a NotFound answer for resource means the API server does not serve it
// at all (its CRD is missing), not that the object is missing: it asks discovery.
func (c *Client) notServed(resource string) bool {
	list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return apierrors.IsNotFound(err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return false
		}
	}
	return true
}

// missing is the error of a read of a named object that the API server answered NotFound.
func (c *Client) missing(resource, what string, notFound error) error {
	if c.notServed(resource) {
		return fmt.Errorf("%s: the API server does not serve %s.%s: %w", what, resource, v1alpha1.Group, ErrCRDsMissing)
	}
	return fmt.Errorf("%s: %w", what, notFound)
}

// Runtime gets the ClusterRuntime (always named "cluster").
func (c *Client) Runtime(ctx context.Context) (*Runtime, error) {
	rt, err := c.Operator.Runtimes().Get(ctx, v1alpha1.RuntimeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, c.missing(runtimeclient.ResourceRuntimes, "get clusterruntime "+v1alpha1.RuntimeName, ErrRuntimeNotFound)
		}
		return nil, fmt.Errorf("get clusterruntime %s: %w", v1alpha1.RuntimeName, err)
	}
	return &Runtime{ClusterRuntime: rt}, nil
}

// Rollout gets a RuntimeRollout by name.
func (c *Client) Rollout(ctx context.Context, name string) (*Rollout, error) {
	ro, err := c.Operator.Rollouts().Get(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, c.missing(runtimeclient.ResourceRollouts, "get runtimerollout "+name, errors.New("not found (kubectl get runtimerollouts lists them)"))
		}
		return nil, fmt.Errorf("get runtimerollout %s: %w", name, err)
	}
	return c.withSteps(ctx, ro)
}

// withSteps reads every one of ro's steps into its Status.Steps (the status lists only those no
// ConfigMap holds).
func (c *Client) withSteps(ctx context.Context, ro *v1alpha1.RuntimeRollout) (*Rollout, error) {
	out := &Rollout{RuntimeRollout: ro}
	if err := c.expand(ctx, out); err != nil {
		return nil, fmt.Errorf("read runtimerollout %s: %w", ro.Name, err)
	}
	return out, nil
}

// CurrentRollout resolves name, or the rollout the runtime names when name is empty.
func (c *Client) CurrentRollout(ctx context.Context, name string) (*Rollout, error) {
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

// Rollouts lists every RuntimeRollout, newest first.
func (c *Client) Rollouts(ctx context.Context) ([]*Rollout, error) {
	list, err := c.Operator.Rollouts().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list runtimerollouts: %w", err)
	}
	out := make([]*Rollout, 0, len(list.Items))
	for i := range list.Items {
		ro, err := c.withSteps(ctx, &list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, ro)
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return tj.Before(&ti)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// PatchRolloutSpec merge-patches a rollout's spec, guarded by the resourceVersion it was read at:
// a concurrent change fails with a conflict instead of being overwritten.
func (c *Client) PatchRolloutSpec(ctx context.Context, ro *Rollout, spec map[string]any) (*Rollout, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": ro.ResourceVersion},
		"spec":     spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encode patch of runtimerollout %s: %w", ro.Name, err)
	}
	got, err := c.Operator.Rollouts().Patch(ctx, ro.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("patch runtimerollout %s: it changed while we wrote; run the command again: %w", ro.Name, err)
		}
		return nil, fmt.Errorf("patch runtimerollout %s: %w", ro.Name, err)
	}
	return c.withSteps(ctx, got)
}

// SetRuntimeFlag merge-patches one boolean of the ClusterRuntime's spec (paused, suspendEngine).
// Setting a value it already has changes nothing, so the call is safe to repeat.
func (c *Client) SetRuntimeFlag(ctx context.Context, field string, value bool) (*Runtime, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{field: value}})
	if err != nil {
		return nil, fmt.Errorf("encode patch of clusterruntime %s: %w", v1alpha1.RuntimeName, err)
	}
	rt, err := c.Operator.Runtimes().Patch(ctx, v1alpha1.RuntimeName, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("set spec.%s of clusterruntime %s: %w", field, v1alpha1.RuntimeName, ErrRuntimeNotFound)
		}
		return nil, fmt.Errorf("set spec.%s of clusterruntime %s: %w", field, v1alpha1.RuntimeName, err)
	}
	return &Runtime{ClusterRuntime: rt}, nil
}

// SetRuntimeAnnotation merge-patches one annotation of the ClusterRuntime.
func (c *Client) SetRuntimeAnnotation(ctx context.Context, key, value string) (*Runtime, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return nil, fmt.Errorf("encode patch of clusterruntime %s: %w", v1alpha1.RuntimeName, err)
	}
	rt, err := c.Operator.Runtimes().Patch(ctx, v1alpha1.RuntimeName, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("annotate clusterruntime %s with %s: %w", v1alpha1.RuntimeName, key, ErrRuntimeNotFound)
		}
		return nil, fmt.Errorf("annotate clusterruntime %s with %s: %w", v1alpha1.RuntimeName, key, err)
	}
	return &Runtime{ClusterRuntime: rt}, nil
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
			return nil, nil, fmt.Errorf("get plan %s: ConfigMap %s/%s not found (is --namespace, the operator namespace, right?)", ref, c.Namespace, name)
		}
		return nil, nil, fmt.Errorf("get plan %s: %w", ref, err)
	}
	p, err := plan.FromConfigMap(cm)
	if err != nil {
		return nil, nil, err
	}
	return p, cm, nil
}

// PlanNames lists the plan ConfigMaps of the operator namespace: their digests, newest first.
func (c *Client) PlanNames(ctx context.Context) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRole: v1alpha1.PlanRoleValue}).String()
	list, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list plans in %s: %w", c.Namespace, err)
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool {
		return items[j].CreationTimestamp.Before(&items[i].CreationTimestamp)
	})
	var out []string
	for _, cm := range items {
		if d := cm.Annotations[v1alpha1.AnnotationPlanDigest]; d != "" {
			out = append(out, d)
		} else {
			out = append(out, cm.Name)
		}
	}
	return out, nil
}

// Bundle reads the bundle document a runtime points at.
func (c *Client) Bundle(ctx context.Context, rt *v1alpha1.ClusterRuntime) ([]byte, error) {
	if oci := rt.Spec.Bundle.OCI; oci != nil {
		return nil, fmt.Errorf("read bundle: clusterruntime %s names an OCI bundle (spec.bundle.oci %s@%s), which the plugin does not pull yet: the registry holds the document as the artifact's one layer (docs/bundle.md)", rt.Name, oci.Repository, oci.Digest)
	}
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

// ApplicationResource is Argo CD's Application.
var ApplicationResource = argoapp.SchemeGroupVersion.WithResource(argoapp.ResourceApplications)

// OwnedApplications lists the Applications in the engine namespace labelled as the operator's for
// the runtime (app.kubernetes.io/managed-by=aicr-operator, operator.aicr.run/runtime=cluster).
func (c *Client) OwnedApplications(ctx context.Context, engineNamespace string) ([]*unstructured.Unstructured, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRuntime: v1alpha1.RuntimeName}).String()
	list, err := c.Dynamic.Resource(ApplicationResource).Namespace(engineNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the operator's applications in %s: %w", engineNamespace, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}
