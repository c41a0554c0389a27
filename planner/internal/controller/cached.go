package controller

import (
	"context"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// cachedStore is the Store the controller reads through. Once Run's informers have synced,
// runtimes, rollouts and the operator namespace's ConfigMaps are read from their caches
// instead of the API server, overlaid with the objects this process wrote: an informer sees
// the planner's own write a few milliseconds after the write returns, and a step's verdict
// and result arrive within those milliseconds. Reading from the caches keeps the per-step reads
// of the runtime and of the whole rollout off the API server (docs/performance.md).
//
// Correctness does not rest on the cache being current. Every write carries the
// resourceVersion it read, so a stale read ends in a conflict; a conflict (or a NotFound)
// marks the object stale and the next read of it goes to the API server, which is what the
// callers' retryConflict loops then use. A cache miss is read from the API server too, so an
// object created elsewhere and not yet seen is never reported missing.
//
// Objects from the caches are deep-copied before they are returned: callers change what they
// read. ConfigMaps are the exception (large plan data, never changed by the planner).
type cachedStore struct {
	Store // the API server: every write, and the reads the caches cannot serve

	mu sync.Mutex
	// The informers' caches, nil until attach; synced reports whether all have synced.
	runtimes, rollouts, configMaps cache.Indexer
	synced                         func() bool
	namespace                      string // the operator namespace: the ConfigMap informer's scope
	// written holds, by key, the object as this process's last write of it returned it,
	// until the informer's copy is as new.
	written map[string]metav1.Object
	// stale holds keys whose next read must come from the API server (a write conflicted).
	stale map[string]bool
	// deleted holds rollouts this process deleted, by name and UID, until the informer
	// forgets them.
	deleted map[string]types.UID
}

func newCachedStore(s Store) *cachedStore {
	return &cachedStore{Store: s, written: map[string]metav1.Object{}, stale: map[string]bool{}, deleted: map[string]types.UID{}}
}

// attach starts serving reads from the informers' caches once synced reports true.
func (s *cachedStore) attach(runtimes, rollouts, configMaps cache.Indexer, namespace string, synced func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtimes, s.rollouts, s.configMaps, s.namespace, s.synced = runtimes, rollouts, configMaps, namespace, synced
}

// forget drops this process's written copy of an object the informer saw deleted (not a
// newer object of the same name, written since).
func (s *cachedStore) forget(kind, name string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kind + "/" + name
	if w := s.written[key]; w != nil && w.GetUID() == uid {
		delete(s.written, key)
	}
}

// invalidate makes the next read of an object come from the API server.
func (s *cachedStore) invalidate(kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kind + "/" + name
	delete(s.written, key)
	s.stale[key] = true
}

const (
	kindRuntime = "runtime"
	kindRollout = "rollout"
)

// cached returns the newer of the informer's copy and this process's last written copy of
// an object; ok is false when the API server must be asked (not synced, stale, or a miss).
// Call with s.mu held.
func (s *cachedStore) cached(idx cache.Indexer, kind, name string) (metav1.Object, bool) {
	if idx == nil || !s.synced() {
		return nil, false
	}
	key := kind + "/" + name
	if s.stale[key] {
		return nil, false
	}
	var inf metav1.Object
	if obj, exists, err := idx.GetByKey(name); err == nil && exists {
		inf, _ = obj.(metav1.Object)
	}
	if uid, ok := s.deleted[name]; ok && kind == kindRollout {
		if inf != nil && inf.GetUID() == uid {
			inf = nil // deleted by this process; the informer has not seen it yet
		} else {
			delete(s.deleted, name) // the informer forgot it too
		}
	}
	w := s.written[key]
	switch {
	case w == nil && inf == nil:
		return nil, false
	case w == nil:
		return inf, true
	case inf != nil && !olderVersion(inf, w):
		delete(s.written, key) // the informer caught up
		return inf, true
	default:
		return w, true
	}
}

// olderVersion reports whether a's resourceVersion is older than b's. Resource versions are
// etcd revisions; one that is not an integer is never called older (the cache wins).
func olderVersion(a, b metav1.Object) bool {
	av, err1 := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	bv, err2 := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return err1 == nil && err2 == nil && av < bv
}

// wrote records the outcome of a write of an object: the returned object on success; on a
// conflict or NotFound, that the next read must come from the API server.
func (s *cachedStore) wrote(kind, name string, out metav1.Object, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kind + "/" + name
	switch {
	case err == nil && out != nil:
		if prev := s.written[key]; prev == nil || !olderVersion(out, prev) {
			s.written[key] = out
		}
		delete(s.stale, key)
		if kind == kindRollout {
			delete(s.deleted, name)
		}
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		delete(s.written, key)
		s.stale[key] = true
	}
}

// read records a read from the API server: the object is now known as of that read.
func (s *cachedStore) read(kind, name string, out metav1.Object, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kind + "/" + name
	if err == nil && out != nil {
		delete(s.stale, key)
		if prev := s.written[key]; prev == nil || !olderVersion(out, prev) {
			s.written[key] = out
		}
	} else if apierrors.IsNotFound(err) {
		delete(s.stale, key)
		delete(s.written, key)
	}
}

// GetRuntime implements Store.
func (s *cachedStore) GetRuntime(ctx context.Context, name string) (*v1alpha1.ClusterRuntime, error) {
	s.mu.Lock()
	obj, ok := s.cached(s.runtimes, kindRuntime, name)
	s.mu.Unlock()
	if ok {
		if rt, isRT := obj.(*v1alpha1.ClusterRuntime); isRT {
			return rt.DeepCopy(), nil
		}
	}
	rt, err := s.Store.GetRuntime(ctx, name)
	s.read(kindRuntime, name, copyRuntime(rt, err), err)
	return rt, err
}

// UpdateRuntime implements Store.
func (s *cachedStore) UpdateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	out, err := s.Store.UpdateRuntime(ctx, rt)
	s.wrote(kindRuntime, rt.Name, copyRuntime(out, err), err)
	return out, err
}

// UpdateRuntimeStatus implements Store.
func (s *cachedStore) UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	out, err := s.Store.UpdateRuntimeStatus(ctx, rt)
	s.wrote(kindRuntime, rt.Name, copyRuntime(out, err), err)
	return out, err
}

// GetRollout implements Store.
func (s *cachedStore) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	s.mu.Lock()
	obj, ok := s.cached(s.rollouts, kindRollout, name)
	s.mu.Unlock()
	if ok {
		if r, isR := obj.(*v1alpha1.RuntimeRollout); isR {
			return r.DeepCopy(), nil
		}
	}
	r, err := s.Store.GetRollout(ctx, name)
	s.read(kindRollout, name, copyRollout(r, err), err)
	return r, err
}

// ListRollouts implements Store: the informer's rollouts of the runtime, each the newer of
// the cached and the written copy, plus those this process created that the informer has
// not seen yet.
func (s *cachedStore) ListRollouts(ctx context.Context, runtimeName string) ([]v1alpha1.RuntimeRollout, error) {
	s.mu.Lock()
	if s.rollouts == nil || !s.synced() {
		s.mu.Unlock()
		return s.Store.ListRollouts(ctx, runtimeName)
	}
	names := map[string]bool{}
	for _, key := range s.rollouts.ListKeys() {
		names[key] = true
	}
	for key := range s.written {
		if name, ok := strings.CutPrefix(key, kindRollout+"/"); ok {
			names[name] = true
		}
	}
	var out []v1alpha1.RuntimeRollout
	var stale bool
	for name := range names {
		if s.stale[kindRollout+"/"+name] {
			stale = true
			break
		}
		obj, ok := s.cached(s.rollouts, kindRollout, name)
		if !ok {
			continue
		}
		if r, isR := obj.(*v1alpha1.RuntimeRollout); isR && r.Labels[v1alpha1.LabelRuntime] == runtimeName {
			out = append(out, *r.DeepCopy())
		}
	}
	s.mu.Unlock()
	if stale {
		return s.Store.ListRollouts(ctx, runtimeName)
	}
	return out, nil
}

// CreateRollout implements Store.
func (s *cachedStore) CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out, err := s.Store.CreateRollout(ctx, r)
	if apierrors.IsAlreadyExists(err) {
		// Created elsewhere and not seen yet: the caller reads it next, from the API server.
		s.mu.Lock()
		s.stale[kindRollout+"/"+r.Name] = true
		s.mu.Unlock()
		return out, err
	}
	s.wrote(kindRollout, r.Name, copyRollout(out, err), err)
	return out, err
}

// UpdateRollout implements Store.
func (s *cachedStore) UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out, err := s.Store.UpdateRollout(ctx, r)
	s.wrote(kindRollout, r.Name, copyRollout(out, err), err)
	return out, err
}

// UpdateRolloutStatus implements Store.
func (s *cachedStore) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out, err := s.Store.UpdateRolloutStatus(ctx, r)
	s.wrote(kindRollout, r.Name, copyRollout(out, err), err)
	return out, err
}

// DeleteRollout implements Store: the rollout is not read from the cache again once deleted.
func (s *cachedStore) DeleteRollout(ctx context.Context, name, uid string) error {
	err := s.Store.DeleteRollout(ctx, name, uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := kindRollout + "/" + name
	switch {
	case err == nil || apierrors.IsNotFound(err):
		delete(s.written, key)
		s.deleted[name] = types.UID(uid)
	case apierrors.IsConflict(err):
		delete(s.written, key)
		s.stale[key] = true
	}
	return err
}

// GetConfigMap implements Store: ConfigMaps of the operator namespace come from the
// informer's cache (not copied: callers only read them), others from the API server.
func (s *cachedStore) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	s.mu.Lock()
	idx, ns, synced := s.configMaps, s.namespace, s.synced
	s.mu.Unlock()
	if idx != nil && namespace == ns && synced() {
		if obj, exists, err := idx.GetByKey(namespace + "/" + name); err == nil && exists {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				return cm, nil
			}
		}
	}
	return s.Store.GetConfigMap(ctx, namespace, name)
}

// ListPlans implements Store: the plan ConfigMaps of the operator namespace come from the
// informer's cache (not copied: callers only read them), others from the API server.
func (s *cachedStore) ListPlans(ctx context.Context, namespace string) ([]corev1.ConfigMap, error) {
	s.mu.Lock()
	idx, ns, synced := s.configMaps, s.namespace, s.synced
	s.mu.Unlock()
	if idx == nil || namespace != ns || !synced() {
		return s.Store.ListPlans(ctx, namespace)
	}
	var out []corev1.ConfigMap
	for _, obj := range idx.List() {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[v1alpha1.LabelRole] == v1alpha1.PlanRoleValue {
			out = append(out, *cm)
		}
	}
	return out, nil
}

func copyRuntime(rt *v1alpha1.ClusterRuntime, err error) metav1.Object {
	if err != nil || rt == nil {
		return nil
	}
	return rt.DeepCopy()
}

func copyRollout(r *v1alpha1.RuntimeRollout, err error) metav1.Object {
	if err != nil || r == nil {
		return nil
	}
	return r.DeepCopy()
}
