package service

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseFence keeps a leader-elected replica from writing to Kubernetes unless it renewed its
// Lease less than RenewDeadline ago (on the monotonic clock, which also runs while the process
// is paused). client-go's elector notices a lost lease only at its next renewal round, up to
// RenewDeadline after it resumes: a leader paused (SIGSTOP, a frozen VM, a long GC) past its
// lease's expiry would wake up and keep writing beside the candidate that took over. Other
// candidates take over only LeaseDuration after they saw the last renewal, which came after the
// renewal's start that opens the fence, so the fence closes LeaseDuration-RenewDeadline before
// anyone else may lead. What it cannot close is a write already checked and then delayed in
// flight for longer than that margin.
type leaseFence struct {
	namespace, name string
	deadline        time.Duration

	mu      sync.Mutex
	leading bool
	renewed time.Time // start of the last successful acquisition or renewal
	now     func() time.Time
}

func newLeaseFence(namespace, name string, renewDeadline time.Duration) *leaseFence {
	return &leaseFence{namespace: namespace, name: name, deadline: renewDeadline, now: time.Now}
}

// check returns nil while the replica may write.
func (f *leaseFence) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leading {
		return fmt.Errorf("write refused: this replica does not lead (lease %s/%s)", f.namespace, f.name)
	}
	if age := f.now().Sub(f.renewed); age >= f.deadline {
		return fmt.Errorf("write refused: lease %s/%s last renewed %s ago, past the renew deadline %s; another replica may lead", f.namespace, f.name, age.Round(time.Millisecond), f.deadline)
	}
	return nil
}

func (f *leaseFence) setLeading(leading bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leading = leading
}

func (f *leaseFence) renewedAt(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.renewed) {
		f.renewed = t
	}
}

// fencedLock records each successful write of the leader election record in the fence, and
// refuses to release the lease (client-go's ReleaseOnCancel, an update with no holder) once the
// fence has closed. client-go reads the lease for its resourceVersion before releasing it but
// decides whether it holds it from the record it observed last: a leader woken from a pause and
// stopped at once would release, with a fresh resourceVersion, the lease another candidate has
// since acquired (make chaos saw that candidate lose its lease to the restarted old one).
type fencedLock struct {
	resourcelock.Interface
	fence *leaseFence
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.fence.renewedAt(start)
	}
	return err
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		if err := l.fence.check(); err != nil {
			return fmt.Errorf("release lease %s/%s: %w", l.fence.namespace, l.fence.name, err)
		}
	}
	start := l.fence.now()
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.fence.renewedAt(start)
	}
	return err
}

// fencedTransport refuses every write but the leader election's own (Leases) while the fence
// is closed; reads pass.
type fencedTransport struct {
	next  http.RoundTripper
	fence *leaseFence
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	if leases := "/apis/coordination.k8s.io/v1/namespaces/" + t.fence.namespace + "/leases"; req.URL.Path == leases || req.URL.Path == leases+"/"+t.fence.name {
		return t.next.RoundTrip(req) // the election itself
	}
	if err := t.fence.check(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}
