package service

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// RunLeader runs work while this replica holds the Lease named after the binary in the operator
// namespace, or at once when leader election is off. work's context ends when leadership is
// lost; RunLeader then returns an error so the binary exits and a fresh replica takes over
// (state lives in Kubernetes; nothing is lost). It returns nil when ctx ends.
func (b *Base) RunLeader(ctx context.Context, work func(ctx context.Context) error) error {
	if !b.opts.LeaderElect {
		return work(ctx)
	}
	if b.KubeClient == nil {
		return fmt.Errorf("leader election needs a Kubernetes client")
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: b.opts.Namespace, Name: v1alpha1.LeaseName(b.Name)},
		Client:     b.KubeClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: b.opts.Identity},
	}
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
				b.Log.Info().Str("identity", b.opts.Identity).Msg("became leader")
				b.leading.Store(1)
				defer b.leading.Store(0)
				defer close(workDone)
				if workErr = work(lctx); workErr != nil {
					cancel()
				}
			},
			OnStoppedLeading: func() {
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
	if workErr != nil {
		return workErr
	}
	if lost {
		return fmt.Errorf("lost leadership of lease %s/aicr-%s", b.opts.Namespace, b.Name)
	}
	return nil
}
