package plan

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultCacheSize is how many plans a Cache keeps when its user names no size. A rollout needs
// two (from and to); the rest cover commands and Applications of older rollouts.
const DefaultCacheSize = 16

// Loader reads the plan ConfigMap of the given name (ConfigMapName of a digest) from the
// operator namespace, with a GET or from an informer's store. A missing ConfigMap is an error
// for which apierrors.IsNotFound holds.
type Loader func(ctx context.Context, name string) (*corev1.ConfigMap, error)

// ConfigMapGetter reads ConfigMaps of one namespace; a typed client's
// CoreV1().ConfigMaps(namespace) satisfies it.
type ConfigMapGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// GetLoader returns the Loader that reads each plan ConfigMap with a GET through cms.
func GetLoader(cms ConfigMapGetter) Loader {
	return func(ctx context.Context, name string) (*corev1.ConfigMap, error) {
		return cms.Get(ctx, name, metav1.GetOptions{})
	}
}

// UnreadableError says the plan of a digest cannot be used: the digest is malformed, no
// ConfigMap holds the plan, or the ConfigMap under its name does not verify against it. Asking
// again does not help while nothing changes (the planner stores a plan before it names it, and
// plans are immutable), but a Cache does not remember the error: a plan stored later is found.
type UnreadableError struct {
	// Digest is the digest asked for.
	Digest string
	// Err is the cause.
	Err error
}

func (e *UnreadableError) Error() string { return fmt.Sprintf("read plan %s: %v", e.Digest, e.Err) }

func (e *UnreadableError) Unwrap() error { return e.Err }

// IsUnreadable reports whether err is, or wraps, an *UnreadableError.
func IsUnreadable(err error) bool {
	var u *UnreadableError
	return errors.As(err, &u)
}

// Cache keeps plans by digest, the most recently used first, up to its size. A plan never
// changes, so a cached plan is never stale; every plan it holds was verified: its canonical bytes
// hash to the digest it is kept under. Concurrent Gets of one digest share one load; errors are
// never cached. It is safe for concurrent use.
type Cache struct {
	load Loader
	size int

	mu      sync.Mutex
	lru     *list.List               // of *Plan, most recently used first
	items   map[string]*list.Element // by digest
	flights map[string]*flight       // loads in progress, by digest
}

// flight is one load in progress; done is closed once plan and err are set.
type flight struct {
	done    chan struct{}
	plan    *Plan
	err     error
	waiters int // Gets waiting for it besides the one loading (tests watch it)
}

// NewCache returns a Cache that loads plans with load and keeps at most size of them
// (DefaultCacheSize when size is 0 or less).
func NewCache(load Loader, size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{load: load, size: size, lru: list.New(), items: map[string]*list.Element{}, flights: map[string]*flight{}}
}

// Get returns the plan with digest, loading it when it is not cached. The error is an
// *UnreadableError when the plan cannot be used (see IsUnreadable), the context's error when
// ctx ended while waiting, and any other error when the loader failed (retry later).
func (c *Cache) Get(ctx context.Context, digest string) (*Plan, error) {
	if err := checkDigest(digest); err != nil {
		return nil, &UnreadableError{Digest: digest, Err: err}
	}
	for {
		c.mu.Lock()
		if e, ok := c.items[digest]; ok {
			c.lru.MoveToFront(e)
			c.mu.Unlock()
			return e.Value.(*Plan), nil
		}
		f, loading := c.flights[digest]
		if !loading {
			f = &flight{done: make(chan struct{})}
			c.flights[digest] = f
			c.mu.Unlock()
			c.fly(ctx, digest, f)
			return f.plan, f.err
		}
		f.waiters++
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			c.mu.Lock()
			f.waiters--
			c.mu.Unlock()
			return nil, fmt.Errorf("read plan %s: %w", digest, ctx.Err())
		}
		// The load that failed because its own caller gave up says nothing about this Get:
		// load again (the loop finds the plan if another Get got it meanwhile).
		if f.err != nil && isContextErr(f.err) && ctx.Err() == nil {
			continue
		}
		return f.plan, f.err
	}
}

// fly runs the load of f and publishes its outcome: the plan into the cache, the error to the
// waiters only.
func (c *Cache) fly(ctx context.Context, digest string, f *flight) {
	defer func() {
		c.mu.Lock()
		delete(c.flights, digest)
		if f.err == nil {
			c.addLocked(digest, f.plan)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.err = errors.New("plan loader panicked") // replaced below unless the loader panics
	f.plan, f.err = c.fetch(ctx, digest)
}

// fetch loads and verifies the plan of digest.
func (c *Cache) fetch(ctx context.Context, digest string) (*Plan, error) {
	name := ConfigMapName(digest)
	cm, err := c.load(ctx, name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && cm == nil):
		return nil, &UnreadableError{Digest: digest, Err: fmt.Errorf("ConfigMap %s not found", name)}
	case err != nil:
		return nil, fmt.Errorf("read plan %s: get ConfigMap %s: %w", digest, name, err)
	}
	p, err := FromConfigMap(cm)
	if err != nil {
		return nil, &UnreadableError{Digest: digest, Err: err}
	}
	// FromConfigMap hashed the canonical bytes and matched them to the ConfigMap's annotation;
	// what is left is that the annotation names the plan asked for.
	if got := p.Digest(); got != digest {
		return nil, &UnreadableError{Digest: digest, Err: fmt.Errorf("ConfigMap %s/%s: holds plan %s, not %s", cm.Namespace, cm.Name, got, digest)}
	}
	return p, nil
}

// Add keeps p, a plan its user resolved (and stored), under its digest, so that a Get of it
// does not load it again. It fails, keeping nothing, when p's canonical bytes do not hash to its
// digest.
func (c *Cache) Add(p *Plan) error {
	if p == nil {
		return errors.New("add plan: nil plan")
	}
	if err := verify(p, p.Digest()); err != nil {
		return fmt.Errorf("add plan %s: %w", p.Digest(), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(p.Digest(), p)
	return nil
}

// Cached returns the plan with digest when it is cached, without loading it.
func (c *Cache) Cached(digest string) (*Plan, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[digest]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*Plan), true
}

// Forget drops the plan with digest, so that the next Get loads it again (and Cached no
// longer reports it): its user deleted the plan's ConfigMap.
func (c *Cache) Forget(digest string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[digest]; ok {
		c.lru.Remove(e)
		delete(c.items, digest)
	}
}

// Len is how many plans are cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *Cache) addLocked(digest string, p *Plan) {
	if e, ok := c.items[digest]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.items[digest] = c.lru.PushFront(p)
	for c.lru.Len() > c.size {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.items, oldest.Value.(*Plan).Digest())
	}
}

// verify checks that p's canonical bytes hash to digest.
func verify(p *Plan, digest string) error {
	sum := sha256.Sum256(p.Canonical())
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest || p.Digest() != digest {
		return fmt.Errorf("holds plan %s, not %s", got, digest)
	}
	return nil
}

// checkDigest accepts "sha256:" and 64 lowercase hex digits, the form Plan.Digest has.
func checkDigest(digest string) error {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return fmt.Errorf("%q is not a plan digest: want sha256: and 64 lowercase hex digits", digest)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return fmt.Errorf("%q is not a plan digest: want sha256: and 64 lowercase hex digits", digest)
	}
	return nil
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
