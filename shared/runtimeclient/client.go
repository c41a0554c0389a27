// Package runtimeclient is the one typed client for the operator's own resources,
// operator.aicr.run/v1alpha1 ClusterRuntimes and RuntimeRollouts (JSON, no generated
// clientset): the binaries, the kubectl plugin and the e2e tests read and write them through it
// rather than each through a dynamic client and a conversion of its own.
package runtimeclient

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Resource names of the two kinds, as the REST paths spell them.
const (
	ResourceRuntimes = "clusterruntimes"
	ResourceRollouts = "runtimerollouts"
)

// Scheme holds the v1alpha1 types.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // scheme setup: a programming error
	}
	return s
}()

// Client is a typed REST client for operator.aicr.run/v1alpha1; both kinds are cluster-scoped.
// Like client-go's typed clients, a method returns an empty object with its error, never nil.
type Client struct {
	rc rest.Interface
}

// NewForConfig returns a Client using cfg's server, credentials and rate limits.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("create operator.aicr.run client: %w", err)
	}
	return &Client{rc: rc}, nil
}

// RESTClient is the underlying REST client.
func (c *Client) RESTClient() rest.Interface { return c.rc }

// ListWatch returns the list-watch of a resource (ResourceRuntimes or ResourceRollouts), for an
// informer.
func (c *Client) ListWatch(resource string) *cache.ListWatch {
	return cache.NewListWatchFromClient(c.rc, resource, metav1.NamespaceAll, fields.Everything())
}

// Runtimes returns the ClusterRuntime API.
func (c *Client) Runtimes() *Runtimes {
	return &Runtimes{rc: c.rc, resource: ResourceRuntimes,
		newObject: func() *v1alpha1.ClusterRuntime { return &v1alpha1.ClusterRuntime{} },
		newList:   func() *v1alpha1.ClusterRuntimeList { return &v1alpha1.ClusterRuntimeList{} }}
}

// Rollouts returns the RuntimeRollout API. A rollout's status may leave its steps to ConfigMaps
// (shared/rolloutsteps reads them back); these methods return the object as stored.
func (c *Client) Rollouts() *Rollouts {
	return &Rollouts{rc: c.rc, resource: ResourceRollouts,
		newObject: func() *v1alpha1.RuntimeRollout { return &v1alpha1.RuntimeRollout{} },
		newList:   func() *v1alpha1.RuntimeRolloutList { return &v1alpha1.RuntimeRolloutList{} }}
}

// Runtimes reads and writes ClusterRuntimes.
type Runtimes = Resource[*v1alpha1.ClusterRuntime, *v1alpha1.ClusterRuntimeList]

// Rollouts reads and writes RuntimeRollouts.
type Rollouts = Resource[*v1alpha1.RuntimeRollout, *v1alpha1.RuntimeRolloutList]

// Object is what a Resource reads and writes: a ClusterRuntime or a RuntimeRollout.
type Object interface {
	runtime.Object
	GetName() string
}

// Resource is the API of one cluster-scoped kind: O its object, L its list.
type Resource[O Object, L runtime.Object] struct {
	rc        rest.Interface
	resource  string
	newObject func() O
	newList   func() L
}

// Get reads one object.
func (r *Resource[O, L]) Get(ctx context.Context, name string) (O, error) {
	out := r.newObject()
	return out, r.rc.Get().Resource(r.resource).Name(name).Do(ctx).Into(out)
}

// List lists the objects.
func (r *Resource[O, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	return out, r.rc.Get().Resource(r.resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

// Watch watches the objects opts select (a field selector on metadata.name follows one), from
// opts.ResourceVersion on; its events carry O.
func (r *Resource[O, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.rc.Get().Resource(r.resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// ListWatch returns the list-watch of the objects fieldSelector selects (empty: all), for an
// informer of O.
func (r *Resource[O, L]) ListWatch(fieldSelector string) *cache.ListWatch {
	return cache.NewFilteredListWatchFromClient(r.rc, r.resource, metav1.NamespaceAll, func(opts *metav1.ListOptions) {
		opts.FieldSelector = fieldSelector
	})
}

// Patch patches an object (pt: a merge patch, say) and returns it as the API server wrote it;
// subresources names a subresource ("status").
func (r *Resource[O, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (O, error) {
	out := r.newObject()
	return out, r.rc.Patch(pt).Resource(r.resource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, metav1.ParameterCodec).Body(data).Do(ctx).Into(out)
}

// Create creates an object.
func (r *Resource[O, L]) Create(ctx context.Context, obj O) (O, error) {
	out := r.newObject()
	return out, r.rc.Post().Resource(r.resource).Body(obj).Do(ctx).Into(out)
}

// Update writes an object's metadata and spec.
func (r *Resource[O, L]) Update(ctx context.Context, obj O) (O, error) {
	out := r.newObject()
	return out, r.rc.Put().Resource(r.resource).Name(obj.GetName()).Body(obj).Do(ctx).Into(out)
}

// UpdateStatus writes an object's status.
func (r *Resource[O, L]) UpdateStatus(ctx context.Context, obj O) (O, error) {
	out := r.newObject()
	return out, r.rc.Put().Resource(r.resource).Name(obj.GetName()).SubResource("status").Body(obj).Do(ctx).Into(out)
}

// Delete deletes an object; opts may carry a UID precondition.
func (r *Resource[O, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.rc.Delete().Resource(r.resource).Name(name).Body(&opts).Do(ctx).Error()
}
