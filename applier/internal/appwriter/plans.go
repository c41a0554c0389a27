package appwriter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/shared/plan"
)

// planCacheSize bounds the plans kept in memory. A rollout needs two (from and to); a few more
// cover commands of an older rollout still in the queue.
const planCacheSize = 16

// ConfigMaps reads the plan ConfigMaps of the operator namespace. The typed client's
// CoreV1().ConfigMaps(namespace) satisfies it.
type ConfigMaps interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// UnreadablePlanError says a plan cannot be used: its ConfigMap is missing or its content does
// not match its digest. Redelivery cannot fix it: the planner stores a plan before it publishes
// a command that names it, and plans are immutable.
type UnreadablePlanError struct {
	// Digest is the plan digest the command named.
	Digest string
	// Err is the cause.
	Err error
}

func (e *UnreadablePlanError) Error() string {
	return fmt.Sprintf("read plan %s: %v", e.Digest, e.Err)
}

func (e *UnreadablePlanError) Unwrap() error { return e.Err }

// PlanCache loads plans by digest and keeps the most recent ones: a plan never changes, so a
// cached plan is never stale.
type PlanCache struct {
	cms       ConfigMaps
	namespace string

	mu    sync.Mutex
	plans map[string]*plan.Plan
	order []string // least recently added first
}

// NewPlanCache returns a cache reading plan ConfigMaps from namespace through cms.
func NewPlanCache(cms ConfigMaps, namespace string) *PlanCache {
	return &PlanCache{cms: cms, namespace: namespace, plans: map[string]*plan.Plan{}}
}

// Get returns the plan with digest. The error is an *UnreadablePlanError when the plan is
// missing or corrupt, and any other error when the API server could not be asked.
func (c *PlanCache) Get(ctx context.Context, digest string) (*plan.Plan, error) {
	c.mu.Lock()
	p, ok := c.plans[digest]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	name := plan.ConfigMapName(digest)
	cm, err := c.cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &UnreadablePlanError{Digest: digest, Err: fmt.Errorf("ConfigMap %s/%s not found", c.namespace, name)}
	case err != nil:
		return nil, fmt.Errorf("get plan ConfigMap %s/%s: %w", c.namespace, name, err)
	}
	p, err = plan.FromConfigMap(cm)
	if err != nil {
		return nil, &UnreadablePlanError{Digest: digest, Err: err}
	}
	if p.Digest() != digest {
		return nil, &UnreadablePlanError{Digest: digest, Err: fmt.Errorf("ConfigMap %s/%s holds plan %s", c.namespace, name, p.Digest())}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.plans[digest]; !ok {
		c.plans[digest] = p
		c.order = append(c.order, digest)
		if len(c.order) > planCacheSize {
			delete(c.plans, c.order[0])
			c.order = c.order[1:]
		}
	}
	return p, nil
}

// isUnreadable reports whether err says the plan cannot be used.
func isUnreadable(err error) bool {
	var u *UnreadablePlanError
	return errors.As(err, &u)
}
