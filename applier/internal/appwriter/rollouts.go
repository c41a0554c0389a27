package appwriter

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// APIRollouts reads RuntimeRollouts with a GET each time (Rollouts).
type APIRollouts struct {
	res dynamic.NamespaceableResourceInterface
}

// NewRollouts returns the Rollouts of the API server cfg points at.
func NewRollouts(cfg *rest.Config) (*APIRollouts, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create rollout client: %w", err)
	}
	return &APIRollouts{res: dyn.Resource(v1alpha1.RuntimeRolloutResource)}, nil
}

// Ended implements Rollouts: a rollout has ended once it has an outcome or a terminal phase,
// or is gone, or another rollout stands under its name.
func (r *APIRollouts) Ended(ctx context.Context, name, uid string) (string, bool, error) {
	u, err := r.res.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", true, nil
	case err != nil:
		return "", false, err
	}
	if uid != "" && string(u.GetUID()) != uid {
		return "", true, nil
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	outcome, _, _ := unstructured.NestedString(u.Object, "status", "outcome")
	return phase, outcome != "" || terminalPhase(v1alpha1.RolloutPhase(phase)), nil
}

// RemoveInProgress implements Rollouts.
func (r *APIRollouts) RemoveInProgress(ctx context.Context, name, release string) (bool, error) {
	u, err := r.res.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	var ro v1alpha1.RuntimeRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return false, fmt.Errorf("decode rollout %s: %w", name, err)
	}
	return ro.RemoveInProgress(release), nil
}

func terminalPhase(p v1alpha1.RolloutPhase) bool {
	switch p {
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseRevoked, v1alpha1.PhaseSuperseded:
		return true
	}
	return false
}
