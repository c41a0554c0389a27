// Package removal checks an owned Application's delete-rollout marker against the rollout it
// names. The marker silences verdicts, drift and the Deleted report of an Application the
// operator is removing; anyone who may edit the Application can set it, so it counts only when
// the rollout it names started a Remove step of that release after the Application was last
// written (v1alpha1.RuntimeRollout.RemoveStartedSince). Any other marker is drift.
package removal

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
)

// Rollouts reads one RuntimeRollout; a missing one is an apierrors NotFound. *APIRollouts
// implements it.
type Rollouts interface {
	Get(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error)
}

// Checker answers whether an Application's marker comes from a Remove step. It reads the
// rollout from the API server, not a cache: the planner writes a step InProgress before it
// publishes the command that makes the applier set the marker, so the read that follows the
// marked Application sees the step. Positive answers are kept per Application UID, marker and
// last write (a Remove step that started stays started), so an Application that Argo CD
// updates while it deletes its resources costs one read.
type Checker struct {
	Rollouts Rollouts

	mu     sync.Mutex
	backed map[key]bool
}

type key struct{ uid, rollout, written string }

func keyOf(app *argoapp.Application) key {
	return key{uid: string(app.UID), rollout: app.Annotations[v1alpha1.AnnotationDeleteRollout], written: app.Annotations[v1alpha1.AnnotationStepStarted]}
}

// Marked reports whether the Application carries the delete-rollout marker.
func Marked(app *argoapp.Application) bool {
	_, ok := app.Annotations[v1alpha1.AnnotationDeleteRollout]
	return ok
}

// Removing reports whether the Application is under a Remove step: it carries the marker and
// the rollout the marker names started a Remove step of its release no earlier than the step
// that last wrote it. An error is a failed read, to retry.
func (c *Checker) Removing(ctx context.Context, app *argoapp.Application) (bool, error) {
	if !Marked(app) {
		return false, nil
	}
	k := keyOf(app)
	c.mu.Lock()
	known := c.backed[k]
	c.mu.Unlock()
	if known {
		return true, nil
	}
	if k.rollout == "" || c.Rollouts == nil {
		return false, nil
	}
	r, err := c.Rollouts.Get(ctx, k.rollout)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read rollout %s, named by the %s annotation of application %s: %w", k.rollout, v1alpha1.AnnotationDeleteRollout, app.Name, err)
	}
	written, _ := time.Parse(time.RFC3339, k.written)
	if !r.RemoveStartedSince(app.Name, written) {
		return false, nil
	}
	c.mu.Lock()
	if c.backed == nil {
		c.backed = map[key]bool{}
	}
	c.backed[k] = true
	c.mu.Unlock()
	return true, nil
}

// Forget drops what is kept about a deleted Application.
func (c *Checker) Forget(app *argoapp.Application) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.backed {
		if k.uid == string(app.UID) {
			delete(c.backed, k)
		}
	}
}

// APIRollouts reads RuntimeRollouts from the API server, one GET each.
type APIRollouts struct {
	rollouts *runtimeclient.Rollouts
}

// NewAPIRollouts returns the Rollouts of the API server cfg points at.
func NewAPIRollouts(cfg *rest.Config) (*APIRollouts, error) {
	c, err := runtimeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create rollout client: %w", err)
	}
	return &APIRollouts{rollouts: c.Rollouts()}, nil
}

// Get implements Rollouts.
func (a *APIRollouts) Get(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	r, err := a.rollouts.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return r, nil
}
