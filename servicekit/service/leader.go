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
	// work has stopped before RunLeader returns, and so a work error ends the election instead
	// of leaving the lease held by a replica doing nothing.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := newLeaderRun()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   b.opts.LeaseDuration,
		RenewDeadline:   b.opts.RenewDeadline,
		RetryPeriod:     b.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            b.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				if !run.begin() {
					return
				}
				b.fence.setLeading(true)
				b.Log.Info().Str("identity", b.opts.Identity).Msg("became leader")
				b.leading.Store(1)
				defer b.leading.Store(0)
				var err error
				defer func() { run.workEnded(err) }()
				watched, stopWatch := context.WithCancel(lctx)
				defer stopWatch()
				go b.watchFence(watched, run, cancel)
				if err = work(watched); err != nil {
					cancel()
				}
			},
			OnStoppedLeading: func() {
				b.fence.setLeading(false)
				if ctx.Err() == nil {
					run.lose()
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("set up leader election: %w", err)
	}
	le.Run(ctx)
	return run.finish().err(fmt.Sprintf("%s/%s", b.opts.Namespace, v1alpha1.LeaseName(b.Name)))
}

// watchFence stops the work (cancel) as soon as the fence closes while leading: the elector
// notices a lease it could not renew only at the end of its renewal round, and a leader woken
// from a pause must neither spin on refused writes nor publish. It returns when ctx ends.
func (b *Base) watchFence(ctx context.Context, run *leaderRun, cancel context.CancelFunc) {
	t := time.NewTicker(fenceWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := b.fence.check(); err != nil {
			b.Log.Warn().Err(err).Msg("stop leading")
			run.goStale()
			cancel()
			return
		}
	}
}

// leaderRun is what one RunLeader shares between its goroutines: the elector's callbacks, the
// fence watcher and RunLeader itself. Every field is under mu.
type leaderRun struct {
	mu       sync.Mutex
	started  bool          // work began
	finished bool          // the election ended: work must not begin any more
	done     chan struct{} // closed when work returned
	outcome  leaderOutcome
}

// leaderOutcome is how a RunLeader ended, for err.
type leaderOutcome struct {
	work  error // what work returned
	lost  bool  // leadership ended while RunLeader's context was live
	stale bool  // the fence closed while leading: the lease went unrenewed too long
}

func newLeaderRun() *leaderRun { return &leaderRun{done: make(chan struct{})} }

// begin reports whether work may start (the election has not ended), and records that it did.
func (r *leaderRun) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return false
	}
	r.started = true
	return true
}

// workEnded records what work returned.
func (r *leaderRun) workEnded(err error) {
	r.mu.Lock()
	r.outcome.work = err
	r.mu.Unlock()
	close(r.done)
}

func (r *leaderRun) lose() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome.lost = true
}

func (r *leaderRun) goStale() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome.stale = true
}

// finish is called once the election ended: no work begins any more, work that began is waited
// for, and the outcome returned.
func (r *leaderRun) finish() leaderOutcome {
	r.mu.Lock()
	r.finished = true
	wait := r.started
	r.mu.Unlock()
	if wait {
		<-r.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcome
}

// err is RunLeader's answer for the lease named: work's error, unless the fence stopped the
// work (its error then only says it was stopped); else an error when leadership was lost or
// went stale, so the binary exits and a fresh replica takes over; nil when the context ended.
func (o leaderOutcome) err(lease string) error {
	if o.work != nil && !o.stale {
		return o.work
	}
	if o.lost || o.stale {
		return fmt.Errorf("lost leadership of lease %s", lease)
	}
	return nil
}
