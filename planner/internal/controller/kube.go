package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
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
	ListPlans(ctx context.Context, namespace string) ([]corev1.ConfigMap, error)
	DeleteConfigMap(ctx context.Context, namespace, name, uid string) error
}

// Kube is the Store on a real API server: the operator's typed client (shared/runtimeclient)
// and the core client for ConfigMaps.
type Kube struct {
	rc   rest.Interface
	c    *runtimeclient.Client
	core kubernetes.Interface
}

// Scheme holds the v1alpha1 types (the Events recorder's).
var Scheme = runtimeclient.Scheme

// NewKube builds the Store from a client configuration.
func NewKube(cfg *rest.Config, core kubernetes.Interface) (*Kube, error) {
	c, err := runtimeclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{rc: c.RESTClient(), c: c, core: core}, nil
}

const (
	resRuntimes = runtimeclient.ResourceRuntimes
	resRollouts = runtimeclient.ResourceRollouts
)

// ListWatch returns the list-watch of a resource ("clusterruntimes" or "runtimerollouts").
func (k *Kube) ListWatch(resource string) *cache.ListWatch {
	return k.c.ListWatch(resource)
}

// GetRuntime implements Store.
func (k *Kube) GetRuntime(ctx context.Context, name string) (*v1alpha1.ClusterRuntime, error) {
	return k.c.Runtimes().Get(ctx, name)
}

// UpdateRuntime implements Store (metadata: the planner's finalizer).
func (k *Kube) UpdateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	return k.c.Runtimes().Update(ctx, rt)
}

// UpdateRuntimeStatus implements Store.
func (k *Kube) UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	return k.c.Runtimes().UpdateStatus(ctx, rt)
}

// ListRollouts implements Store: the rollouts labelled with the runtime.
func (k *Kube) ListRollouts(ctx context.Context, runtimeName string) ([]v1alpha1.RuntimeRollout, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRuntime: runtimeName}).String()
	out, err := k.c.Rollouts().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// GetRollout implements Store.
func (k *Kube) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	return k.c.Rollouts().Get(ctx, name)
}

// CreateRollout implements Store.
func (k *Kube) CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	return k.c.Rollouts().Create(ctx, r)
}

// UpdateRollout implements Store (metadata: the outcome label).
func (k *Kube) UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	return k.c.Rollouts().Update(ctx, r)
}

// UpdateRolloutStatus implements Store.
func (k *Kube) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	return k.c.Rollouts().UpdateStatus(ctx, r)
}

// DeleteRollout implements Store, with a UID precondition.
func (k *Kube) DeleteRollout(ctx context.Context, name, uid string) error {
	u := typesUID(uid)
	return k.c.Rollouts().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}})
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

// ListPlans implements Store: the plan ConfigMaps of namespace (label role=plan).
func (k *Kube) ListPlans(ctx context.Context, namespace string) ([]corev1.ConfigMap, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelRole: v1alpha1.PlanRoleValue}).String()
	out, err := k.core.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// DeleteConfigMap implements Store, with a UID precondition.
func (k *Kube) DeleteConfigMap(ctx context.Context, namespace, name, uid string) error {
	u := typesUID(uid)
	return k.core.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}})
}

func typesUID(s string) types.UID { return types.UID(s) }
