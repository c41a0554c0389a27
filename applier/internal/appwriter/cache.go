package appwriter

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// ListWatcher gives the list-watch of the Applications matching a label selector;
// *argoapp.Applications satisfies it.
type ListWatcher interface {
	ListWatch(labelSelector string) *cache.ListWatch
}

// Informer is the writer's Cache: an informer on the owned Applications (label
// app.kubernetes.io/managed-by=aicr-operator) of the engine namespace, keeping of each what the
// writer reads (metadata without managedFields, and the spec). A name it does not hold (not
// synced yet, not owned, new) is read with a GET.
type Informer struct {
	namespace string
	informer  cache.SharedIndexInformer
}

// NewInformer returns the Informer of the owned Applications of namespace, listed and watched
// through lw.
func NewInformer(lw ListWatcher, namespace string) (*Informer, error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).String()
	inf := cache.NewSharedIndexInformer(lw.ListWatch(sel), &argoapp.Application{}, 0, cache.Indexers{})
	if err := inf.SetTransform(trimForWriter); err != nil {
		return nil, fmt.Errorf("set application transform: %w", err)
	}
	return &Informer{namespace: namespace, informer: inf}, nil
}

// Run watches until ctx ends; it returns nil.
func (i *Informer) Run(ctx context.Context) error {
	i.informer.RunWithContext(ctx)
	return nil
}

// HasSynced reports whether the informer has listed the Applications once.
func (i *Informer) HasSynced() bool { return i.informer.HasSynced() }

// Get implements Cache. The object is shared with the informer: callers must not change it.
func (i *Informer) Get(name string) (*argoapp.Application, bool) {
	obj, ok, err := i.informer.GetStore().GetByKey(i.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	app, ok := obj.(*argoapp.Application)
	return app, ok
}

// trimForWriter drops what the writer never reads of a cached Application: status, operation
// (both read from the write's response when needed) and managedFields.
func trimForWriter(obj any) (any, error) {
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return obj, nil // a tombstone: unchanged
	}
	app.ManagedFields = nil
	app.Status = argoapp.ApplicationStatus{}
	app.Operation = nil
	return app, nil
}
