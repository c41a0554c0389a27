package kube

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
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
	runtime       *v1alpha1.ClusterRuntime
	rollout       *v1alpha1.RuntimeRollout
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
		lw := f.c.Operator.Runtimes().ListWatch(nameSelector(v1alpha1.RuntimeName))
		go f.watch(ctx, lw, &v1alpha1.ClusterRuntime{}, runtimeclient.ResourceRuntimes+" "+v1alpha1.RuntimeName, func(obj any, synced bool) {
			if synced {
				f.runtimeSynced = true
				return
			}
			f.runtime, _ = obj.(*v1alpha1.ClusterRuntime)
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
		lw := f.c.Operator.Rollouts().ListWatch(nameSelector(name))
		go f.watch(rctx, lw, &v1alpha1.RuntimeRollout{}, runtimeclient.ResourceRollouts+" "+name, func(obj any, synced bool) {
			if synced {
				f.rolloutSynced = true
				return
			}
			f.rollout, _ = obj.(*v1alpha1.RuntimeRollout)
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
			want = f.runtime.Status.Rollout
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
	// Copies: the informers' objects are shared, and the steps are read into the rollout's.
	if f.runtime != nil {
		s.Runtime = &Runtime{ClusterRuntime: f.runtime.DeepCopy()}
	}
	if f.rollout != nil {
		s.Rollout = &Rollout{RuntimeRollout: f.rollout.DeepCopy()}
	}
	return s
}

func (f *follower) signal() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// nameSelector selects the one object called name.
func nameSelector(name string) string {
	return fields.OneTermEqualSelector("metadata.name", name).String()
}

// watch runs an informer of example's type on lw (one object, what names it) until ctx ends.
// set stores the object (nil when it is gone), or with synced says the first list was handed
// over (an object that does not exist gives no event), under f.mu; current says whether this
// watch is still the wanted one.
func (f *follower) watch(ctx context.Context, lw *cache.ListWatch, example runtime.Object, what string, set func(obj any, synced bool), current func() bool) {
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	update := func(obj any, gone bool) {
		f.mu.Lock()
		if current() {
			if gone {
				obj = nil
			}
			set(obj, false)
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
		f.err = fmt.Errorf("watch %s: %w", what, err)
		f.mu.Unlock()
		f.signal()
		return
	}
	// The informer retries by itself; the error is shown until the next event.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		f.mu.Lock()
		if current() {
			f.err = fmt.Errorf("watch %s: %w", what, err)
		}
		f.mu.Unlock()
		f.signal()
	})
	go inf.RunWithContext(ctx)
	// Say once the first list has been handed to the handler (the registration's HasSynced,
	// not the store's).
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		f.mu.Lock()
		if current() {
			set(nil, true)
		}
		f.mu.Unlock()
		f.signal()
	}
	<-ctx.Done()
}
