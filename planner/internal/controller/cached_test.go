package controller

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// versionedStore is an API server in memory for the cache's tests: resource versions grow
// with every write, a write with an old resourceVersion conflicts, and reads are counted.
type versionedStore struct {
	memStore
	rv       int
	rollouts map[string]*v1alpha1.RuntimeRollout
	reads    atomic.Int32
}

func newVersionedStore() *versionedStore {
	return &versionedStore{rollouts: map[string]*v1alpha1.RuntimeRollout{}}
}

func (s *versionedStore) next() string { s.rv++; return strconv.Itoa(s.rv) }

func (s *versionedStore) GetRollout(_ context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	s.reads.Add(1)
	r, ok := s.rollouts[name]
	if !ok {
		return nil, apierrors.NewNotFound(grRollout, name)
	}
	return r.DeepCopy(), nil
}

func (s *versionedStore) ListRollouts(context.Context, string) ([]v1alpha1.RuntimeRollout, error) {
	s.reads.Add(1)
	var out []v1alpha1.RuntimeRollout
	for _, r := range s.rollouts {
		out = append(out, *r.DeepCopy())
	}
	return out, nil
}

func (s *versionedStore) CreateRollout(_ context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	if _, ok := s.rollouts[r.Name]; ok {
		return nil, apierrors.NewAlreadyExists(grRollout, r.Name)
	}
	r = r.DeepCopy()
	r.ResourceVersion, r.UID = s.next(), types.UID("uid-"+r.Name+"-"+strconv.Itoa(s.rv))
	s.rollouts[r.Name] = r
	return r.DeepCopy(), nil
}

func (s *versionedStore) UpdateRolloutStatus(_ context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	cur, ok := s.rollouts[r.Name]
	if !ok {
		return nil, apierrors.NewNotFound(grRollout, r.Name)
	}
	if cur.ResourceVersion != r.ResourceVersion {
		return nil, apierrors.NewConflict(grRollout, r.Name, nil)
	}
	cur = cur.DeepCopy()
	cur.Status = *r.Status.DeepCopy()
	cur.ResourceVersion = s.next()
	s.rollouts[r.Name] = cur
	return cur.DeepCopy(), nil
}

func (s *versionedStore) DeleteRollout(_ context.Context, name, _ string) error {
	delete(s.rollouts, name)
	return nil
}

func (s *versionedStore) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	s.reads.Add(1)
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

// cacheFixture is a cachedStore over a versionedStore, with indexers the test fills as an
// informer would.
type cacheFixture struct {
	live     *versionedStore
	store    *cachedStore
	rollouts cache.Indexer
	cms      cache.Indexer
	synced   atomic.Bool
}

func newCacheFixture() *cacheFixture {
	f := &cacheFixture{live: newVersionedStore()}
	f.store = newCachedStore(f.live)
	f.rollouts = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	f.cms = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	runtimes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	f.synced.Store(true)
	f.store.attach(runtimes, f.rollouts, f.cms, "aicr-system", f.synced.Load)
	return f
}

// informerSees copies the API server's current rollout into the informer's cache.
func (f *cacheFixture) informerSees(t *testing.T, name string) {
	t.Helper()
	if err := f.rollouts.Update(f.live.rollouts[name].DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

func testRollout(name string) *v1alpha1.RuntimeRollout {
	return &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelRuntime: "cluster"}},
		Spec: v1alpha1.RuntimeRolloutSpec{Runtime: "cluster"}}
}

// Once synced, a rollout the informer holds is read without a request; what the caller
// changes in the copy it got does not change the cache.
func TestCachedReadsComeFromTheInformer(t *testing.T) {
	f := newCacheFixture()
	ctx := context.Background()
	if _, err := f.live.CreateRollout(ctx, testRollout("r1")); err != nil {
		t.Fatal(err)
	}
	f.informerSees(t, "r1")
	r, err := f.store.GetRollout(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if n := f.live.reads.Load(); n != 0 {
		t.Fatalf("%d API reads, want 0", n)
	}
	r.Status.Phase = v1alpha1.PhaseFailed
	again, _ := f.store.GetRollout(ctx, "r1")
	if again.Status.Phase != "" {
		t.Fatalf("the cache kept the caller's change: phase %q", again.Status.Phase)
	}
	list, err := f.store.ListRollouts(ctx, "cluster")
	if err != nil || len(list) != 1 || f.live.reads.Load() != 0 {
		t.Fatalf("list: %d rollouts, err %v, %d API reads; want 1, nil, 0", len(list), err, f.live.reads.Load())
	}
	if other, _ := f.store.ListRollouts(ctx, "other"); len(other) != 0 {
		t.Fatalf("rollouts of runtime other: %d, want 0", len(other))
	}
}

// Before the caches synced, and on a miss, the API server answers.
func TestCachedReadsGoLiveUnsyncedAndOnAMiss(t *testing.T) {
	f := newCacheFixture()
	ctx := context.Background()
	if _, err := f.live.CreateRollout(ctx, testRollout("r1")); err != nil {
		t.Fatal(err)
	}
	f.synced.Store(false)
	f.informerSees(t, "r1")
	if _, err := f.store.GetRollout(ctx, "r1"); err != nil || f.live.reads.Load() != 1 {
		t.Fatalf("unsynced: err %v, %d API reads; want nil, 1", err, f.live.reads.Load())
	}
	f.synced.Store(true)
	if _, err := f.live.CreateRollout(ctx, testRollout("r2")); err != nil {
		t.Fatal(err)
	}
	if r, err := f.store.GetRollout(ctx, "r2"); err != nil || r.Name != "r2" {
		t.Fatalf("miss: %v, %v; want r2 from the API server", r, err)
	}
	if _, err := f.store.GetConfigMap(ctx, "aicr-system", "absent"); !apierrors.IsNotFound(err) || f.live.reads.Load() != 3 {
		t.Fatalf("ConfigMap miss: err %v, %d API reads; want NotFound, 3", err, f.live.reads.Load())
	}
}

// The planner's own write is read back before the informer sees it, and the informer's copy
// wins again once it is as new.
func TestCachedReadsSeeOwnWrites(t *testing.T) {
	f := newCacheFixture()
	ctx := context.Background()
	created, err := f.store.CreateRollout(ctx, testRollout("r1"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := f.store.ListRollouts(ctx, "cluster")
	if len(list) != 1 || list[0].ResourceVersion != created.ResourceVersion {
		t.Fatalf("a created rollout the informer has not seen: list %v", list)
	}
	f.informerSees(t, "r1")
	created.Status.Phase = v1alpha1.PhaseProgressing
	written, err := f.store.UpdateRolloutStatus(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.store.GetRollout(ctx, "r1")
	if got.ResourceVersion != written.ResourceVersion || got.Status.Phase != v1alpha1.PhaseProgressing {
		t.Fatalf("read rv %s phase %q, want the written rv %s and Progressing", got.ResourceVersion, got.Status.Phase, written.ResourceVersion)
	}
	// Someone else writes after the informer caught up: the informer's newer copy is read.
	f.informerSees(t, "r1")
	other := f.live.rollouts["r1"].DeepCopy()
	other.Status.Message = "written elsewhere"
	if _, err := f.live.UpdateRolloutStatus(ctx, other); err != nil {
		t.Fatal(err)
	}
	f.informerSees(t, "r1")
	got, _ = f.store.GetRollout(ctx, "r1")
	if got.Status.Message != "written elsewhere" || f.live.reads.Load() != 0 {
		t.Fatalf("read %q with %d API reads, want the informer's newer copy without a request", got.Status.Message, f.live.reads.Load())
	}
}

// A write from a stale read conflicts; the next read comes from the API server, so a
// retryConflict loop makes progress even while the informer lags.
func TestCachedConflictReadsLive(t *testing.T) {
	f := newCacheFixture()
	ctx := context.Background()
	if _, err := f.live.CreateRollout(ctx, testRollout("r1")); err != nil {
		t.Fatal(err)
	}
	f.informerSees(t, "r1")
	other := f.live.rollouts["r1"].DeepCopy()
	other.Status.Message = "written elsewhere"
	if _, err := f.live.UpdateRolloutStatus(ctx, other); err != nil {
		t.Fatal(err)
	}
	attempts := 0
	err := retryConflict(func() error {
		attempts++
		cur, err := f.store.GetRollout(ctx, "r1")
		if err != nil {
			return err
		}
		cur.Status.Phase = v1alpha1.PhaseProgressing
		_, err = f.store.UpdateRolloutStatus(ctx, cur)
		return err
	})
	if err != nil || attempts != 2 {
		t.Fatalf("err %v after %d attempts, want nil after 2 (the cached read, then a live one)", err, attempts)
	}
	if got := f.live.rollouts["r1"]; got.Status.Message != "written elsewhere" || got.Status.Phase != v1alpha1.PhaseProgressing {
		t.Fatalf("stored status %+v, want both writes", got.Status)
	}
}

// A rollout the planner deleted is not listed while the informer still holds it; a new
// rollout of the same name is.
func TestCachedDeletedRolloutIsGone(t *testing.T) {
	f := newCacheFixture()
	ctx := context.Background()
	old, err := f.store.CreateRollout(ctx, testRollout("r1"))
	if err != nil {
		t.Fatal(err)
	}
	f.informerSees(t, "r1")
	if err := f.store.DeleteRollout(ctx, "r1", string(old.UID)); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.store.ListRollouts(ctx, "cluster"); len(list) != 0 {
		t.Fatalf("deleted rollout still listed: %v", list)
	}
	fresh, err := f.store.CreateRollout(ctx, testRollout("r1"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := f.store.ListRollouts(ctx, "cluster")
	if len(list) != 1 || list[0].UID != fresh.UID {
		t.Fatalf("list %v, want only the new rollout %s", list, fresh.UID)
	}
	// The informer's delete event of the old object leaves the new one's copy alone.
	f.store.forget(kindRollout, "r1", old.UID)
	if got, err := f.store.GetRollout(ctx, "r1"); err != nil || got.UID != fresh.UID {
		t.Fatalf("after the old object's delete event: %v, %v; want the new rollout", got, err)
	}
}

// A command is never published from a stale cache: a rollout the informer still shows in
// flight, but which ended meanwhile, publishes nothing from a new planner process.
func TestNoCommandFromAStaleCache(t *testing.T) {
	p, err := plan.Resolve(chainBundle(2), plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	rt := engineReported(&v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "u1", ResourceVersion: "1"}})
	deadline := metav1.NewTime(clk.Now().Add(time.Hour))
	r := testRollout(rollout.Name("", p.Digest()))
	r.Spec = v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "u1", ToDigest: p.Digest(), Deadline: &deadline}
	rollout.Initialize(r, plan.Steps(nil, p, plan.StepOptions{}))
	rollout.Advance(r, rollout.Env{Now: clk.Now()}) // step 1 in flight: what the cache holds

	f := newCacheFixture()
	f.live.runtime = rt
	ctx := context.Background()
	created, err := f.live.CreateRollout(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	f.informerSees(t, created.Name)
	ended := created.DeepCopy()
	ended.Status.Phase, ended.Status.Outcome = v1alpha1.PhaseSucceeded, v1alpha1.OutcomeSucceeded
	for i := range ended.Status.Steps {
		ended.Status.Steps[i].State = v1alpha1.StepSucceeded
	}
	if _, err := f.live.UpdateRolloutStatus(ctx, ended); err != nil { // the informer has not seen this
		t.Fatal(err)
	}

	pub := &countingPublisher{}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Clock: clk}, f.live, pub)
	defer c.queue.ShutDown()
	c.cache.attach(f.store.runtimes, f.rollouts, f.cms, "aicr-system", func() bool { return true })
	out, _, err := c.advance(ctx, rt, created.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pub.n != 0 {
		t.Fatalf("%d commands published from the cached rollout, want 0 (it ended)", pub.n)
	}
	if out.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("advanced rollout is %s, want the live Succeeded one", out.Status.Phase)
	}
	// The same process, with the rollout current in its cache, publishes a step in flight.
	f.live.rollouts[created.Name] = created.DeepCopy()
	f.live.rollouts[created.Name].ResourceVersion = f.live.next()
	f.informerSees(t, created.Name)
	if _, _, err := c.advance(ctx, rt, created.Name, nil); err != nil {
		t.Fatal(err)
	}
	if pub.n != 1 {
		t.Fatalf("%d commands for the rollout in flight, want 1", pub.n)
	}
}
