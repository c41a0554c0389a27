package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Store is the planner's view of the API server. It has more than the usual one to three
// methods because it is the one seam between the decisions and Kubernetes: Kube implements it
// against the API server, and benchmarks use an in-memory one.
type Store interface {
	GetRuntime(ctx context.Context, name string) (*v1alpha1.ClusterRuntime, error)
	UpdateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error)
	UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error)
	ListRollouts(ctx context.Context, runtime string) ([]v1alpha1.RuntimeRollout, error)
	GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error)
	CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error)
	UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error)
	UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error)
	DeleteRollout(ctx context.Context, name, uid string) error
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) error
}

// Kube is the Store on a real API server: a small typed REST client for operator.aicr.run
// (no generated clientset) and the core client for ConfigMaps.
type Kube struct {
	rc   rest.Interface
	core kubernetes.Interface
}

// Scheme holds the v1alpha1 types for the REST client.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // scheme setup: a programming error
	}
	return s
}()

// NewKube builds the Store from a client configuration.
func NewKube(cfg *rest.Config, core kubernetes.Interface) (*Kube, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("create operator.aicr.run client: %w", err)
	}
	return &Kube{rc: rc, core: core}, nil
}

const (
	resRuntimes = "clusterruntimes"
	resRollouts = "runtimerollouts"
)

// ListWatch returns the list-watch of a resource ("clusterruntimes" or "runtimerollouts").
func (k *Kube) ListWatch(resource string) *cache.ListWatch {
	return cache.NewListWatchFromClient(k.rc, resource, metav1.NamespaceAll, fields.Everything())
}

// GetRuntime implements Store.
func (k *Kube) GetRuntime(ctx context.Context, name string) (*v1alpha1.ClusterRuntime, error) {
	out := &v1alpha1.ClusterRuntime{}
	return out, k.rc.Get().Resource(resRuntimes).Name(name).Do(ctx).Into(out)
}

// UpdateRuntime implements Store (metadata: the planner's finalizer).
func (k *Kube) UpdateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	out := &v1alpha1.ClusterRuntime{}
	return out, k.rc.Put().Resource(resRuntimes).Name(rt.Name).Body(rt).Do(ctx).Into(out)
}

// UpdateRuntimeStatus implements Store.
func (k *Kube) UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	out := &v1alpha1.ClusterRuntime{}
	return out, k.rc.Put().Resource(resRuntimes).Name(rt.Name).SubResource("status").Body(rt).Do(ctx).Into(out)
}

// ListRollouts implements Store: the rollouts labelled with the runtime.
func (k *Kube) ListRollouts(ctx context.Context, runtimeName string) ([]v1alpha1.RuntimeRollout, error) {
	out := &v1alpha1.RuntimeRolloutList{}
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRuntime: runtimeName}).String()
	if err := k.rc.Get().Resource(resRollouts).Param("labelSelector", sel).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// GetRollout implements Store.
func (k *Kube) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	out := &v1alpha1.RuntimeRollout{}
	return out, k.rc.Get().Resource(resRollouts).Name(name).Do(ctx).Into(out)
}

// CreateRollout implements Store.
func (k *Kube) CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out := &v1alpha1.RuntimeRollout{}
	return out, k.rc.Post().Resource(resRollouts).Body(r).Do(ctx).Into(out)
}

// UpdateRollout implements Store (metadata: the outcome label).
func (k *Kube) UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out := &v1alpha1.RuntimeRollout{}
	return out, k.rc.Put().Resource(resRollouts).Name(r.Name).Body(r).Do(ctx).Into(out)
}

// UpdateRolloutStatus implements Store.
func (k *Kube) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out := &v1alpha1.RuntimeRollout{}
	return out, k.rc.Put().Resource(resRollouts).Name(r.Name).SubResource("status").Body(r).Do(ctx).Into(out)
}

// DeleteRollout implements Store, with a UID precondition.
func (k *Kube) DeleteRollout(ctx context.Context, name, uid string) error {
	u := typesUID(uid)
	return k.rc.Delete().Resource(resRollouts).Name(name).Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}}).Do(ctx).Error()
}

// GetConfigMap implements Store.
func (k *Kube) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return k.core.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateConfigMap implements Store.
func (k *Kube) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := k.core.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	return err
}

func typesUID(s string) types.UID { return types.UID(s) }
