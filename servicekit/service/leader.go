package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// fenceWatchEvery is how often a leader checks that its lease fence is still open.
const fenceWatchEvery = 250 * time.Millisecond

// RunLeader runs work while this replica holds the Lease named after the binary in the operator
// namespace, or at once when leader election is off. work's context ends when leadership is
// lost; RunLeader then returns an error so the binary exits and a fresh replica takes over
// (state lives in Kubernetes; nothing is lost). It returns nil when ctx ends.
//
// Every write of the binary's Kubernetes clients is fenced (fence.go): it is refused unless this
// replica leads and renewed the lease less than the renew deadline ago, so a leader that was
// paused past its lease's expiry does not write in the moments before it notices.
func (b *Base) RunLeader(ctx context.Context, work func(ctx context.Context) error) error {
	if !b.opts.LeaderElect {
		return work(ctx)
	}
	if b.KubeClient == nil || b.fence == nil {
		return fmt.Errorf("leader election needs a Kubernetes client")
	}
	lock := &fencedLock{fence: b.fence, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: b.opts.Namespace, Name: v1alpha1.LeaseName(b.Name)},
		Client:     b.KubeClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: b.opts.Identity},
	}}
	defer b.fence.setLeading(false)
	// The elector runs OnStartedLeading in a goroutine it does not wait for: own it here, so
	// work has stopped (and workErr is safe to read) before RunLeader returns, and so a work
	// error ends the election instead of leaving the lease held by a replica doing nothing.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		workErr  error
		workDone = make(chan struct{})
		mu       sync.Mutex
		started  bool // work began
		finished bool // le.Run returned: work must not begin any more
		lost     bool
		stale    bool // the fence closed while leading: the lease went unrenewed too long
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   b.opts.LeaseDuration,
		RenewDeadline:   b.opts.RenewDeadline,
		RetryPeriod:     b.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            b.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if finished {
					mu.Unlock()
					return
				}
				started = true
				mu.Unlock()
				b.fence.setLeading(true)
				b.Log.Info().Str("identity", b.opts.Identity).Msg("became leader")
				b.leading.Store(1)
				defer b.leading.Store(0)
				defer close(workDone)
				watched, stopWatch := context.WithCancel(lctx)
				defer stopWatch()
				go func() {
					// The elector notices a lease it could not renew only at the end of its
					// renewal round; stop the work as soon as the fence closes (a leader woken
					// from a pause), so it neither spins on refused writes nor publishes.
					t := time.NewTicker(fenceWatchEvery)
					defer t.Stop()
					for {
						select {
						case <-watched.Done():
							return
						case <-t.C:
						}
						if err := b.fence.check(); err != nil {
							b.Log.Warn().Err(err).Msg("stop leading")
							mu.Lock()
							stale = true
							mu.Unlock()
							cancel()
							return
						}
					}
				}()
				if workErr = work(watched); workErr != nil {
					cancel()
				}
			},
			OnStoppedLeading: func() {
				b.fence.setLeading(false)
				if ctx.Err() == nil {
					lost = true
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("set up leader election: %w", err)
	}
	le.Run(ctx)
	mu.Lock()
	finished = true
	wait := started
	mu.Unlock()
	if wait {
		<-workDone
	}
	mu.Lock()
	stopped := stale
	mu.Unlock()
	if workErr != nil && !stopped {
		return workErr
	}
	if lost || stopped {
		return fmt.Errorf("lost leadership of lease %s/%s", b.opts.Namespace, v1alpha1.LeaseName(b.Name))
	}
	return nil
}
