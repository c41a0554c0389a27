package appwriter

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
)

// APIRollouts reads RuntimeRollouts with a GET each time (Rollouts).
type APIRollouts struct {
	rollouts *runtimeclient.Rollouts
}

// NewRollouts returns the Rollouts of the API server cfg points at.
func NewRollouts(cfg *rest.Config) (*APIRollouts, error) {
	c, err := runtimeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create rollout client: %w", err)
	}
	return &APIRollouts{rollouts: c.Rollouts()}, nil
}

// Ended implements Rollouts: a rollout has ended once it has an outcome or a terminal phase,
// or is gone, or another rollout stands under its name.
func (r *APIRollouts) Ended(ctx context.Context, name, uid string) (string, bool, error) {
	ro, err := r.rollouts.Get(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return "", true, nil
	case err != nil:
		return "", false, err
	}
	if uid != "" && string(ro.UID) != uid {
		return "", true, nil
	}
	return string(ro.Status.Phase), ro.Ended(), nil
}

// RemoveInProgress implements Rollouts.
func (r *APIRollouts) RemoveInProgress(ctx context.Context, name, release string) (bool, error) {
	ro, err := r.rollouts.Get(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return ro.RemoveInProgress(release), nil
}
