package service

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// okTransport answers every request 200 and counts them.
type okTransport struct{ n int }

func (t *okTransport) RoundTrip(*http.Request) (*http.Response, error) {
	t.n++
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// fakeLock is a lock whose writes fail when err is set.
type fakeLock struct {
	resourcelock.Interface
	err error
}

func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err }

// The fence lets a leader write only within the renew deadline of its last successful renewal,
// and always lets reads and the election's own Lease writes through.
func TestLeaseFence(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const deadline = 4 * time.Second
	req := func(method, path string) *http.Request {
		return &http.Request{Method: method, URL: &url.URL{Path: path}}
	}
	status := req(http.MethodPut, "/apis/operator.aicr.run/v1alpha1/runtimerollouts/r1/status")
	tests := map[string]struct {
		leading bool
		renewed bool          // a renewal succeeded at t0
		at      time.Duration // when the request is made
		req     *http.Request
		refused string
	}{
		"a leader that renewed a moment ago writes":       {leading: true, renewed: true, at: time.Second, req: status},
		"a leader past its renew deadline does not":       {leading: true, renewed: true, at: deadline, req: status, refused: "last renewed 4s ago, past the renew deadline 4s"},
		"a leader woken from a pause long after does not": {leading: true, renewed: true, at: time.Minute, req: status, refused: "last renewed 1m0s ago"},
		"a candidate that does not lead does not":         {renewed: true, at: time.Second, req: status, refused: "does not lead (lease aicr-system/aicr-planner)"},
		"a create is a write":                             {at: 0, req: req(http.MethodPost, "/api/v1/namespaces/default/events"), refused: "does not lead"},
		"a delete is a write":                             {at: 0, req: req(http.MethodDelete, "/api/v1/namespaces/aicr-system/configmaps/x"), refused: "does not lead"},
		"a read passes":                                   {at: time.Minute, req: req(http.MethodGet, "/apis/operator.aicr.run/v1alpha1/runtimerollouts")},
		"the election renews its own lease":               {at: time.Minute, req: req(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/aicr-system/leases/aicr-planner")},
		"the election creates its own lease":              {at: 0, req: req(http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/aicr-system/leases")},
		"another lease is fenced like any other object":   {at: 0, req: req(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/aicr-system/leases/other"), refused: "does not lead"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now := t0
			f := newLeaseFence("aicr-system", "aicr-planner", deadline)
			f.now = func() time.Time { return now }
			if tc.renewed {
				lock := &fencedLock{Interface: &fakeLock{}, fence: f}
				if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "planner-0"}); err != nil {
					t.Fatal(err)
				}
			}
			f.setLeading(tc.leading)
			now = t0.Add(tc.at)
			next := &okTransport{}
			_, err := (&fencedTransport{next: next, fence: f}).RoundTrip(tc.req)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("err = %v, want it to contain %q", err, tc.refused)
			case tc.refused != "" && next.n != 0:
				t.Errorf("a refused request reached the API server")
			}
		})
	}
}

// Only a successful write of the election record renews the fence, from when it began.
func TestFencedLockRenewsOnSuccessOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	f := newLeaseFence("aicr-system", "aicr-planner", 4*time.Second)
	f.now = func() time.Time { return now }
	f.setLeading(true)
	failing := &fencedLock{Interface: &fakeLock{err: errors.New("conflict")}, fence: f}
	if err := failing.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "planner-0"}); err == nil {
		t.Fatal("the failing lock's Update succeeded")
	}
	if err := f.check(); err == nil {
		t.Errorf("a failed renewal opened the fence")
	}
	ok := &fencedLock{Interface: &fakeLock{}, fence: f}
	if err := ok.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "planner-0"}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(3 * time.Second)
	if err := f.check(); err != nil {
		t.Errorf("3s after a successful acquisition: %v", err)
	}
}

// A lease is released (an update without a holder) only while the fence is open: a leader whose
// last renewal is past the renew deadline may no longer hold it.
func TestFencedLockReleasesOnlyAFreshLease(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	f := newLeaseFence("aicr-system", "aicr-planner", 4*time.Second)
	f.now = func() time.Time { return now }
	f.setLeading(true)
	lock := &fencedLock{Interface: &fakeLock{}, fence: f}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "planner-0"}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(time.Second)
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Errorf("release a second after renewing: %v", err)
	}
	now = t0.Add(time.Minute)
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err == nil || !strings.Contains(err.Error(), "release lease aicr-system/aicr-planner") {
		t.Errorf("release a minute after the last renewal: %v, want it refused", err)
	}
}
