package kube

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Snapshot is what a follower last saw. Runtime is nil when the ClusterRuntime does not exist (or
// is not followed); Rollout is nil when no rollout is named yet or it does not exist.
type Snapshot struct {
	Runtime *Runtime
	Rollout *Rollout
	// RolloutName is the rollout followed ("" while the runtime names none).
	RolloutName string
	// Synced is true once every watch has listed its objects at least once.
	Synced bool
	// Err is the latest error of a watch, cleared by the next event; the watches retry on their own.
	Err error
}

// FollowOptions say what to follow.
type FollowOptions struct {
	// Runtime follows the ClusterRuntime.
	Runtime bool
	// Rollout names the rollout to follow; empty follows the one the runtime names (which needs
	// Runtime), switching when the runtime moves to a new rollout.
	Rollout string
}

// Follow watches the ClusterRuntime and a rollout through the API server (a list, then a watch,
// each resumed by its informer after an error or a dropped connection) and sends a Snapshot after
// every change. Only the newest snapshot waits in the channel: a slow reader skips intermediate
// states, never the latest. The channel is closed once ctx ends.
func (c *Client) Follow(ctx context.Context, o FollowOptions) <-chan Snapshot {
	f := &follower{c: c, o: o, out: make(chan Snapshot, 1), kick: make(chan struct{}, 1)}
	go f.run(ctx)
	return f.out
}

type follower struct {
	c   *Client
	o   FollowOptions
	out chan Snapshot

	kick chan struct{}

	mu            sync.Mutex
	runtime       *unstructured.Unstructured
	rollout       *unstructured.Unstructured
	rolloutName   string
	runtimeSynced bool
	rolloutSynced bool
	err           error
	// generation counts rollout watches, so that events of a stopped one are dropped.
	generation int
}

func (f *follower) run(ctx context.Context) {
	defer close(f.out)
	var stopRollout context.CancelFunc = func() {}
	defer func() { stopRollout() }()
	if f.o.Runtime {
		go f.watch(ctx, v1alpha1.ClusterRuntimeResource, v1alpha1.RuntimeName, func(u *unstructured.Unstructured, synced bool) {
			f.runtime, f.runtimeSynced = u, f.runtimeSynced || synced
		}, func() bool { return true })
	} else {
		f.runtimeSynced = true
	}
	startRollout := func(name string) {
		stopRollout()
		f.mu.Lock()
		f.generation++
		gen := f.generation
		f.rolloutName, f.rollout, f.rolloutSynced = name, nil, name == ""
		f.mu.Unlock()
		if name == "" {
			stopRollout = func() {}
			return
		}
		rctx, cancel := context.WithCancel(ctx)
		stopRollout = cancel
		go f.watch(rctx, v1alpha1.RuntimeRolloutResource, name, func(u *unstructured.Unstructured, synced bool) {
			f.rollout, f.rolloutSynced = u, f.rolloutSynced || synced
		}, func() bool { return f.generation == gen })
	}
	startRollout(f.o.Rollout)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		f.mu.Lock()
		want := f.rolloutName
		if f.o.Rollout == "" && f.runtime != nil {
			rt, err := RuntimeFrom(f.runtime)
			if err == nil {
				want = rt.Status.Rollout
			}
		}
		f.mu.Unlock()
		if want != f.rolloutName {
			startRollout(want)
		}
		s := f.snapshot()
		if s.Rollout != nil && s.Err == nil {
			if err := f.c.expand(ctx, s.Rollout); err != nil {
				s.Err = fmt.Errorf("read runtimerollout %s: %w", s.Rollout.Name, err)
			}
		}
		select {
		case <-f.out: // drop the unread older snapshot
		default:
		}
		f.out <- s
	}
}

func (f *follower) snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Snapshot{RolloutName: f.rolloutName, Synced: f.runtimeSynced && f.rolloutSynced, Err: f.err}
	if f.runtime != nil {
		rt, err := RuntimeFrom(f.runtime.DeepCopy())
		if err != nil {
			s.Err = err
		}
		s.Runtime = rt
	}
	if f.rollout != nil {
		ro, err := RolloutFrom(f.rollout.DeepCopy())
		if err != nil {
			s.Err = err
		}
		s.Rollout = ro
	}
	return s
}

func (f *follower) signal() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// watch runs an informer on one object by name until ctx ends. set stores the object (nil when it
// is gone) under f.mu, and current says whether this watch is still the wanted one.
func (f *follower) watch(ctx context.Context, gvr schema.GroupVersionResource, name string, set func(u *unstructured.Unstructured, synced bool), current func() bool) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	res := f.c.Dynamic.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return res.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	update := func(obj any, gone bool) {
		u, _ := obj.(*unstructured.Unstructured)
		f.mu.Lock()
		if current() {
			if gone {
				u = nil
			}
			set(u, false)
			f.err = nil
		}
		f.mu.Unlock()
		f.signal()
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(obj, false) },
		UpdateFunc: func(_, obj any) { update(obj, false) },
		DeleteFunc: func(obj any) { update(obj, true) },
	})
	if err != nil {
		f.mu.Lock()
		f.err = fmt.Errorf("watch %s %s: %w", gvr.Resource, name, err)
		f.mu.Unlock()
		f.signal()
		return
	}
	// The informer retries by itself; the error is shown until the next event.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		f.mu.Lock()
		if current() {
			f.err = fmt.Errorf("watch %s %s: %w", gvr.Resource, name, err)
		}
		f.mu.Unlock()
		f.signal()
	})
	go inf.RunWithContext(ctx)
	// An object that does not exist gives no event: say once the first list has been handed
	// to the handler (the registration's HasSynced, not the store's).
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		f.mu.Lock()
		if current() {
			set(f.current(gvr), true)
		}
		f.mu.Unlock()
		f.signal()
	}
	<-ctx.Done()
}

// current returns what the follower holds for gvr (so a synced-but-empty watch keeps nil).
func (f *follower) current(gvr schema.GroupVersionResource) *unstructured.Unstructured {
	if gvr == v1alpha1.ClusterRuntimeResource {
		return f.runtime
	}
	return f.rollout
}
