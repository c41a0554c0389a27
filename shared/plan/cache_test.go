package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// cachePlan resolves a one-component plan whose values carry tag, and its ConfigMap.
func cachePlan(t *testing.T, tag string) (*Plan, *corev1.ConfigMap) {
	t.Helper()
	b := mustParse(t, []byte(fmt.Sprintf(`apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: cache-test, version: 1.0.0}
components:
  - name: app
    namespace: app
    chart: {path: charts/app, digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111"}
    values: {tag: %q}
`, tag)))
	p := mustResolve(t, b, Inputs{})
	cm, err := p.ConfigMap("aicr-system")
	if err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	return p, cm
}

// store is a loader over a map of ConfigMaps by name, counting loads per name.
type store struct {
	mu    sync.Mutex
	cms   map[string]*corev1.ConfigMap
	err   error // returned by every load while set
	loads map[string]int
}

func newStore(cms ...*corev1.ConfigMap) *store {
	s := &store{cms: map[string]*corev1.ConfigMap{}, loads: map[string]int{}}
	for _, cm := range cms {
		s.cms[cm.Name] = cm
	}
	return s
}

func (s *store) load(_ context.Context, name string) (*corev1.ConfigMap, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads[name]++
	if s.err != nil {
		return nil, s.err
	}
	cm, ok := s.cms[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return cm.DeepCopy(), nil
}

func (s *store) loadsOf(digest string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[ConfigMapName(digest)]
}

func TestCacheGet(t *testing.T) {
	p, cm := cachePlan(t, "one")
	other, _ := cachePlan(t, "other")
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	tests := map[string]struct {
		cms            func() []*corev1.ConfigMap
		loadErr        error
		digest         string
		wantUnreadable bool
		wantErr        string // "" for success
		wantLoads      int    // after two Gets
	}{
		"a stored plan is loaded once": {
			cms: func() []*corev1.ConfigMap { return []*corev1.ConfigMap{cm} }, digest: p.Digest(), wantLoads: 1,
		},
		"a missing plan is unreadable and not remembered": {
			cms: func() []*corev1.ConfigMap { return nil }, digest: p.Digest(),
			wantUnreadable: true, wantErr: "not found", wantLoads: 2,
		},
		"content that does not hash to its annotation is unreadable": {
			cms: func() []*corev1.ConfigMap {
				bad := cm.DeepCopy()
				bad.Data[v1alpha1.PlanDataKey] = strings.Replace(bad.Data[v1alpha1.PlanDataKey], "one", "two", 1)
				return []*corev1.ConfigMap{bad}
			},
			digest: p.Digest(), wantUnreadable: true, wantErr: "does not match", wantLoads: 2,
		},
		"a valid plan under the name of another digest is unreadable": {
			cms: func() []*corev1.ConfigMap {
				moved := cm.DeepCopy()
				moved.Name = ConfigMapName(other.Digest())
				return []*corev1.ConfigMap{moved}
			},
			digest: other.Digest(), wantUnreadable: true, wantErr: "holds plan " + p.Digest(), wantLoads: 2,
		},
		"a loader error is transient and not remembered": {
			cms: func() []*corev1.ConfigMap { return []*corev1.ConfigMap{cm} }, loadErr: unavailable, digest: p.Digest(),
			wantErr: "etcd leader changed", wantLoads: 2,
		},
		"a malformed digest is unreadable without a load": {
			cms: func() []*corev1.ConfigMap { return []*corev1.ConfigMap{cm} }, digest: "sha256:ABC",
			wantUnreadable: true, wantErr: "not a plan digest", wantLoads: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStore(tc.cms()...)
			s.err = tc.loadErr
			c := NewCache(s.load, 0)
			for range 2 {
				got, err := c.Get(context.Background(), tc.digest)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("Get: %v", err)
					}
					if got.Digest() != tc.digest {
						t.Errorf("digest = %s, want %s", got.Digest(), tc.digest)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Get error = %v, want one saying %q", err, tc.wantErr)
				}
				if IsUnreadable(err) != tc.wantUnreadable {
					t.Errorf("IsUnreadable = %v, want %v (%v)", !tc.wantUnreadable, tc.wantUnreadable, err)
				}
				if tc.loadErr != nil && !errors.Is(err, tc.loadErr) {
					t.Errorf("error %v does not wrap the loader's", err)
				}
			}
			if n := s.loadsOf(tc.digest); n != tc.wantLoads {
				t.Errorf("loads = %d, want %d", n, tc.wantLoads)
			}
			if tc.wantErr != "" && c.Len() != 0 {
				t.Errorf("%d plans cached after errors only", c.Len())
			}
		})
	}
}

func TestCacheIsBoundedLeastRecentlyUsedFirst(t *testing.T) {
	var plans []*Plan
	s := newStore()
	for i := range 4 {
		p, cm := cachePlan(t, fmt.Sprint(i))
		plans = append(plans, p)
		s.cms[cm.Name] = cm
	}
	c := NewCache(s.load, 3)
	ctx := context.Background()
	for _, p := range plans[:3] {
		if _, err := c.Get(ctx, p.Digest()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, plans[0].Digest()); err != nil { // 0 becomes the most recently used
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, plans[3].Digest()); err != nil { // evicts 1, the least recently used
		t.Fatal(err)
	}
	if c.Len() != 3 {
		t.Errorf("Len = %d, want the bound 3", c.Len())
	}
	for i, want := range []bool{true, false, true, true} {
		if _, ok := c.Cached(plans[i].Digest()); ok != want {
			t.Errorf("plan %d cached = %v, want %v", i, ok, want)
		}
	}
	if _, err := c.Get(ctx, plans[1].Digest()); err != nil {
		t.Fatal(err)
	}
	if n := s.loadsOf(plans[1].Digest()); n != 2 {
		t.Errorf("the evicted plan was loaded %d times, want 2", n)
	}
	if n := s.loadsOf(plans[0].Digest()); n != 1 {
		t.Errorf("the recently used plan was loaded %d times, want 1", n)
	}
}

func TestCacheDefaultSize(t *testing.T) {
	s := newStore()
	c := NewCache(s.load, 0)
	for i := range DefaultCacheSize + 2 {
		p, cm := cachePlan(t, fmt.Sprint(i))
		s.cms[cm.Name] = cm
		if _, err := c.Get(context.Background(), p.Digest()); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != DefaultCacheSize {
		t.Errorf("Len = %d, want %d", c.Len(), DefaultCacheSize)
	}
}

// blockingLoader holds every load until release is closed, counting them.
type blockingLoader struct {
	store   *store
	release chan struct{}
	started chan struct{} // receives once per load
	calls   atomic.Int32
}

func (b *blockingLoader) load(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	b.calls.Add(1)
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.store.load(ctx, name)
}

// waitWaiters polls until n Gets wait for the load of digest.
func waitWaiters(t *testing.T, c *Cache, digest string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		f := c.flights[digest]
		got := 0
		if f != nil {
			got = f.waiters
		}
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Gets wait for the load, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCacheConcurrentGetsShareOneLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    error
		wantErr bool
	}{
		{name: "success"},
		{name: "error", fail: apierrors.NewServiceUnavailable("etcd leader changed"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cm := cachePlan(t, "shared")
			s := newStore(cm)
			s.err = tc.fail
			b := &blockingLoader{store: s, release: make(chan struct{}), started: make(chan struct{}, 16)}
			c := NewCache(b.load, 0)
			const n = 8
			var wg sync.WaitGroup
			errs := make([]error, n)
			got := make([]*Plan, n)
			for i := range n {
				wg.Go(func() { got[i], errs[i] = c.Get(context.Background(), p.Digest()) })
			}
			<-b.started
			waitWaiters(t, c, p.Digest(), n-1)
			close(b.release)
			wg.Wait()
			if calls := b.calls.Load(); calls != 1 {
				t.Errorf("%d concurrent Gets loaded %d times, want once", n, calls)
			}
			for i := range n {
				if tc.wantErr {
					if !errors.Is(errs[i], tc.fail) {
						t.Errorf("Get %d: %v, want the loader's error", i, errs[i])
					}
					continue
				}
				if errs[i] != nil || got[i] != got[0] {
					t.Errorf("Get %d = %p, %v; want the one plan %p", i, got[i], errs[i], got[0])
				}
			}
			// An error is not remembered: the next Get loads again.
			s.mu.Lock()
			s.err = nil
			s.mu.Unlock()
			if _, err := c.Get(context.Background(), p.Digest()); err != nil {
				t.Fatalf("Get after: %v", err)
			}
			want := int32(1)
			if tc.wantErr {
				want = 2
			}
			if calls := b.calls.Load(); calls != want {
				t.Errorf("loads after a last Get = %d, want %d", calls, want)
			}
		})
	}
}

// TestCacheWaiterOutlivesALoaderWhoseCallerGaveUp: a Get that waits for another's load does not
// inherit that caller's cancellation; it loads itself.
func TestCacheWaiterOutlivesALoaderWhoseCallerGaveUp(t *testing.T) {
	p, cm := cachePlan(t, "shared")
	b := &blockingLoader{store: newStore(cm), release: make(chan struct{}), started: make(chan struct{}, 16)}
	c := NewCache(b.load, 0)
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Get(first, p.Digest())
		firstErr <- err
	}()
	<-b.started
	second := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), p.Digest())
		second <- err
	}()
	waitWaiters(t, c, p.Digest(), 1)
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled Get = %v, want context.Canceled", err)
	}
	<-b.started // the waiter's own load
	close(b.release)
	if err := <-second; err != nil {
		t.Errorf("the waiting Get = %v, want the plan", err)
	}
	if _, ok := c.Cached(p.Digest()); !ok {
		t.Errorf("the plan the waiter loaded is not cached")
	}
}

func TestCacheWaiterHonoursItsContext(t *testing.T) {
	p, cm := cachePlan(t, "shared")
	b := &blockingLoader{store: newStore(cm), release: make(chan struct{}), started: make(chan struct{}, 16)}
	c := NewCache(b.load, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.Get(context.Background(), p.Digest()); err != nil {
			t.Errorf("the loading Get: %v", err)
		}
	}()
	<-b.started
	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, p.Digest())
		waiter <- err
	}()
	waitWaiters(t, c, p.Digest(), 1)
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled waiter = %v, want context.Canceled", err)
	}
	close(b.release)
	<-done
	if calls := b.calls.Load(); calls != 1 {
		t.Errorf("loads = %d, want 1", calls)
	}
}

func TestCacheAdd(t *testing.T) {
	p, _ := cachePlan(t, "resolved")
	other, _ := cachePlan(t, "other")
	s := newStore()
	c := NewCache(s.load, 0)
	if err := c.Add(p); err != nil {
		t.Fatalf("Add: %v", err)
	}
	got, err := c.Get(context.Background(), p.Digest())
	if err != nil || got != p {
		t.Fatalf("Get after Add = %p, %v; want the added plan %p", got, err, p)
	}
	if n := s.loadsOf(p.Digest()); n != 0 {
		t.Errorf("an added plan was loaded %d times", n)
	}

	forged := *p
	forged.digest = other.Digest() // canonical bytes of p under other's digest
	if err := c.Add(&forged); err == nil || !strings.Contains(err.Error(), "holds plan "+p.Digest()) {
		t.Errorf("Add of a plan whose bytes do not hash to its digest = %v, want an error", err)
	}
	if _, ok := c.Cached(other.Digest()); ok {
		t.Errorf("the forged plan was cached")
	}
	if err := c.Add(&Plan{}); err == nil {
		t.Errorf("Add of an unsealed plan succeeded")
	}
	if c.Len() != 1 {
		t.Errorf("Len = %d, want 1", c.Len())
	}
}

// A forgotten plan is not reported as cached, and the next Get loads it again: its ConfigMap was
// deleted, and whoever stores it next must not skip the store because the cache still has it.
func TestCacheForget(t *testing.T) {
	p, _ := cachePlan(t, "resolved")
	s := newStore()
	c := NewCache(s.load, 0)
	if err := c.Add(p); err != nil {
		t.Fatal(err)
	}
	c.Forget(p.Digest())
	c.Forget(p.Digest()) // twice is fine
	if _, ok := c.Cached(p.Digest()); ok || c.Len() != 0 {
		t.Fatalf("after Forget: cached %v, Len %d; want gone", ok, c.Len())
	}
	if _, err := c.Get(context.Background(), p.Digest()); err == nil {
		t.Errorf("Get after Forget with no ConfigMap = nil error; want the loader's")
	}
	if n := s.loadsOf(p.Digest()); n != 1 {
		t.Errorf("Get after Forget loaded %d times, want 1", n)
	}
}

func TestGetLoaderReadsThroughTheGetter(t *testing.T) {
	p, cm := cachePlan(t, "get")
	g := getter{cm.Name: cm}
	c := NewCache(GetLoader(g), 0)
	if got, err := c.Get(context.Background(), p.Digest()); err != nil || got.Digest() != p.Digest() {
		t.Fatalf("Get = %v, %v", got, err)
	}
	other, _ := cachePlan(t, "absent")
	if _, err := c.Get(context.Background(), other.Digest()); !IsUnreadable(err) {
		t.Errorf("Get of an absent plan = %v, want unreadable", err)
	}
}

// getter is a ConfigMapGetter over a map by name.
type getter map[string]*corev1.ConfigMap

func (g getter) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	if cm, ok := g[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}
