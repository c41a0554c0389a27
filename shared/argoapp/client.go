package argoapp

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Client is a typed REST client for argoproj.io/v1alpha1 (JSON): Applications and AppProjects.
//
// +kubebuilder:object:generate=false
type Client struct {
	rc rest.Interface
}

// NewForConfig returns a Client using cfg's server, credentials and rate limits.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("create argoproj.io client: %w", err)
	}
	return &Client{rc: rc}, nil
}

// RESTClient is the underlying REST client.
func (c *Client) RESTClient() rest.Interface { return c.rc }

// Applications returns the Application API of a namespace.
func (c *Client) Applications(namespace string) *Applications {
	return &Applications{rc: c.rc, ns: namespace}
}

// AppProjects returns the AppProject API of a namespace.
func (c *Client) AppProjects(namespace string) *AppProjects {
	return &AppProjects{rc: c.rc, ns: namespace}
}

// Applications reads, creates, patches and deletes the Applications of one namespace. It has no
// Update, and Create takes an encoded body rather than an Application, on purpose: an
// Application read through this package lacks the fields it does not declare, and writing one
// back whole would erase them. Write with server-side apply (types.ApplyPatchType) or a merge
// patch of the fields you own; create with the manifest you built.
//
// +kubebuilder:object:generate=false
type Applications struct {
	rc rest.Interface
	ns string
}

// Get reads one Application.
func (a *Applications) Get(ctx context.Context, name string, opts metav1.GetOptions) (*Application, error) {
	out := &Application{}
	err := a.rc.Get().Namespace(a.ns).Resource(ResourceApplications).Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List lists Applications.
func (a *Applications) List(ctx context.Context, opts metav1.ListOptions) (*ApplicationList, error) {
	out := &ApplicationList{}
	err := a.rc.Get().Namespace(a.ns).Resource(ResourceApplications).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Watch watches Applications, each event decoded in one pass (eventDecoder). Like client-go's
// watches, it is not rate limited.
func (a *Applications) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return watchStream(a.rc.Get().Namespace(a.ns).Resource(ResourceApplications).
		VersionedParams(&opts, metav1.ParameterCodec).Throttle(nil).Stream(ctx))
}

// Create creates one Application from its JSON manifest; it fails with AlreadyExists when the
// name is taken, where a server-side apply would take the object over.
func (a *Applications) Create(ctx context.Context, body []byte, opts metav1.CreateOptions) (*Application, error) {
	out := &Application{}
	err := a.rc.Post().Namespace(a.ns).Resource(ResourceApplications).
		VersionedParams(&opts, metav1.ParameterCodec).Body(body).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Patch patches one Application: a server-side apply (types.ApplyPatchType, with
// opts.FieldManager and opts.Force), a JSON merge patch or a JSON patch.
func (a *Applications) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*Application, error) {
	out := &Application{}
	err := a.rc.Patch(pt).Namespace(a.ns).Resource(ResourceApplications).Name(name).SubResource(subresources...).
		VersionedParams(&opts, metav1.ParameterCodec).Body(data).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete deletes one Application (opts.Preconditions guard it by UID or resourceVersion).
func (a *Applications) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return a.rc.Delete().Namespace(a.ns).Resource(ResourceApplications).Name(name).Body(&opts).Do(ctx).Error()
}

// ListWatch is the list-watch of the namespace's Applications matching a label selector, for
// an informer. The reflector lists through it with a streaming list (sendInitialEvents) when
// client-go's WatchListClient feature is on.
func (a *Applications) ListWatch(labelSelector string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = labelSelector
			return a.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = labelSelector
			return a.Watch(ctx, opts)
		},
	}
}

// AppProjects reads the AppProjects of one namespace.
//
// +kubebuilder:object:generate=false
type AppProjects struct {
	rc rest.Interface
	ns string
}

// Get reads one AppProject (its metadata: enough to know it exists).
func (p *AppProjects) Get(ctx context.Context, name string, opts metav1.GetOptions) (*AppProject, error) {
	out := &AppProject{}
	err := p.rc.Get().Namespace(p.ns).Resource(ResourceAppProjects).Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}
