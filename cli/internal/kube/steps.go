package kube

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// stepConfigMaps keeps the immutable ConfigMaps that hold rollouts' steps, read once each.
type stepConfigMaps struct {
	mu   sync.Mutex
	byNS map[string]*corev1.ConfigMap // namespace/name
}

func (s *stepConfigMaps) get(ctx context.Context, c *Client, namespace, name string) (*corev1.ConfigMap, error) {
	key := namespace + "/" + name
	s.mu.Lock()
	cm, ok := s.byNS[key]
	s.mu.Unlock()
	if ok {
		return cm, nil
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("%w (reading a rollout's steps needs get on configmaps in %s)", err, namespace)
		}
		return nil, err
	}
	s.mu.Lock()
	if s.byNS == nil {
		s.byNS = map[string]*corev1.ConfigMap{}
	}
	s.byNS[key] = cm
	s.mu.Unlock()
	return cm, nil
}

// expand fills ro.Status.Steps with every step of the rollout (shared/rolloutsteps): the
// status lists only those no ConfigMap holds. ro.Raw has them too, so -o json|yaml|jsonpath
// show every step; its status.stepRecords still says where they are kept.
func (c *Client) expand(ctx context.Context, ro *Rollout) error {
	if ro.Status.StepRecords == nil {
		return nil
	}
	steps, err := rolloutsteps.Expand(ctx, ro.RuntimeRollout, func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		return c.steps.get(ctx, c, namespace, name)
	})
	if err != nil {
		return err
	}
	ro.Status.Steps = steps
	return nil
}
