//go:build chaos || e2e

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Where the kube-apiserver (default --etcd-prefix) stores what the audit reads: Applications and
// RuntimeRollouts as JSON, Leases as protobuf.
const (
	etcdPrefix      = "/registry/"
	applicationsKey = etcdPrefix + "argoproj.io/applications/" + stack.EngineNamespace + "/"
	rolloutsKey     = etcdPrefix + "operator.aicr.run/runtimerollouts/"
	leasesKey       = etcdPrefix + "leases/" + stack.OperatorNamespace + "/aicr-"
)

// Named timeouts of the audit.
const (
	etcdDialTimeout = 10 * time.Second
	// watchRetry separates attempts to watch etcd again while it is down.
	watchRetry = 200 * time.Millisecond
)

// auditor reads every write stored in etcd from a watch of the whole keyspace, in revision order
// (one sequence across every object), and across kube-apiserver and etcd restarts: what a watch
// through the apiserver could only see as a relist. Per Application it checks:
//   - one spec per step: no step ID is stored with two different specs (a stale or duplicated
//     command that wrote another spec under a step);
//   - no going back: an Application never carries a step it left (a stale command of an
//     earlier rollout writing after a later one);
//   - every deletion was an approved Remove's: when an Application's deletion begins it carries
//     operator.aicr.run/delete-rollout naming a rollout that, at that revision, holds a person's
//     approval and a started Remove step of that release;
//   - no Remove deleted a recreated namesake: the deleted Application (its UID) was stored
//     before that Remove step started.
//
// It also records, per leader-elected binary, who acquired the Lease when (leaseHolder), and
// when any rollout progressed (a phase or step state changed): the stall measure.
type auditor struct {
	admin string // the person approving Remove steps

	mu         sync.Mutex
	apps       map[string]*appHistory
	rollouts   map[string]*rolloutRecord
	leases     map[string][]leaseRecord // by binary
	progress   []progressEvent
	lastRev    int64
	writes     int
	deletions  int
	violations []string
	done       chan struct{}
	// syncs and successes are the sync audit's (syncaudit_test.go).
	syncs     map[string]map[string]bool
	successes map[string]bool
}

type appHistory struct {
	uid      string
	created  int64             // revision at which uid was first stored
	deleting bool              // uid's deletion was checked
	specs    map[string]string // step -> spec JSON
	steps    []string          // steps in the order written
}

type rolloutRecord struct {
	approved      bool
	removeStarted map[string]int64 // release -> revision at which its Remove step was first seen started
	signature     string           // phase and step states
}

// progressEvent is a rollout write that changed its phase or a step's state, seen at at; waiting
// says the rollout then waited for a person's approval, so the time until the next progress is
// not a stall. what names the rollout and its new phase and step states, for the stall trace.
type progressEvent struct {
	at      time.Time
	waiting bool
	what    string
}

// leaseRecord is one holder of a Lease, from when it acquired it.
type leaseRecord struct {
	holder   string
	acquired time.Time
}

func newAuditor(admin string) *auditor {
	return &auditor{admin: admin, apps: map[string]*appHistory{}, rollouts: map[string]*rolloutRecord{},
		leases: map[string][]leaseRecord{}, done: make(chan struct{}), syncs: map[string]map[string]bool{}, successes: map[string]bool{}}
}

// startAuditor watches etcd from its current revision until ctx ends; wait for done after.
func startAuditor(ctx context.Context, etcdURL, admin string) (*auditor, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: etcdDialTimeout})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	// The Leases as they are now: who leads when the audit begins.
	cur, err := cli.Get(ctx, leasesKey, clientv3.WithPrefix())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("read the leases from etcd: %w", err)
	}
	a := newAuditor(admin)
	a.lastRev = cur.Header.Revision
	for _, kv := range cur.Kvs {
		a.observeLease(strings.TrimPrefix(string(kv.Key), leasesKey), kv.Value)
	}
	go func() {
		defer close(a.done)
		defer cli.Close()
		for ctx.Err() == nil {
			// Resume after the last revision seen: etcd restarts (a fault) end the watch.
			wch := cli.Watch(clientv3.WithRequireLeader(ctx), etcdPrefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(a.lastRev+1))
			for resp := range wch {
				if err := resp.Err(); err != nil {
					if errors.Is(err, rpctypes.ErrCompacted) {
						a.violate("the etcd audit fell behind a compaction at revision %d: writes after %d are unaudited", resp.CompactRevision, a.lastRev)
						return
					}
					break
				}
				for _, ev := range resp.Events {
					a.observe(ev, time.Now())
				}
			}
			pause(ctx, watchRetry)
		}
	}()
	return a, nil
}

func (a *auditor) violate(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.violations = append(a.violations, fmt.Sprintf(format, args...))
}

// observe records one stored write, seen at time at.
func (a *auditor) observe(ev *clientv3.Event, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := string(ev.Kv.Key)
	rev := ev.Kv.ModRevision
	a.lastRev = max(a.lastRev, rev)
	switch {
	case strings.HasPrefix(key, applicationsKey):
		a.observeApp(strings.TrimPrefix(key, applicationsKey), ev, rev)
	case strings.HasPrefix(key, rolloutsKey) && ev.Type == clientv3.EventTypePut:
		a.observeRollout(strings.TrimPrefix(key, rolloutsKey), ev.Kv.Value, rev, at)
	case strings.HasPrefix(key, leasesKey) && ev.Type == clientv3.EventTypePut:
		a.observeLease(strings.TrimPrefix(key, leasesKey), ev.Kv.Value)
	}
}

func (a *auditor) observeApp(name string, ev *clientv3.Event, rev int64) {
	var u unstructured.Unstructured
	raw := ev.Kv.Value
	if ev.Type == clientv3.EventTypeDelete {
		if ev.PrevKv == nil {
			a.violations = append(a.violations, fmt.Sprintf("Application %s was deleted at etcd revision %d; its last version is unknown", name, rev))
			return
		}
		raw = ev.PrevKv.Value
	}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		a.violations = append(a.violations, fmt.Sprintf("Application %s at etcd revision %d: not JSON: %v", name, rev, err))
		return
	}
	h := a.apps[name]
	if h == nil {
		h = &appHistory{specs: map[string]string{}}
		a.apps[name] = h
	}
	if uid := string(u.GetUID()); uid != h.uid {
		h.uid, h.created, h.deleting = uid, rev, false
	}
	if ev.Type == clientv3.EventTypeDelete || u.GetDeletionTimestamp() != nil {
		if !h.deleting {
			h.deleting = true
			a.deletions++
			a.checkDeletion(name, &u, h, rev)
		}
		return
	}
	a.writes++
	step := u.GetAnnotations()[v1alpha1.AnnotationStep]
	if step == "" {
		return
	}
	a.observeSync(name, step, &u, rev)
	spec, _ := json.Marshal(u.Object["spec"]) // maps marshal with sorted keys
	if prev, ok := h.specs[step]; ok && prev != string(spec) {
		a.violations = append(a.violations, fmt.Sprintf("Application %s written twice under step %s with different specs (etcd revision %d):\n  first: %s\n  then:  %s", name, step, rev, prev, spec))
	} else if !ok {
		h.specs[step] = string(spec)
	}
	if n := len(h.steps); n == 0 || h.steps[n-1] != step {
		if slices.Contains(h.steps, step) {
			a.violations = append(a.violations, fmt.Sprintf("Application %s went back to step %s after %s (etcd revision %d)", name, step, h.steps[n-1], rev))
		}
		h.steps = append(h.steps, step)
	}
}

// checkDeletion checks the deletion of u (uid h.uid) that began at revision rev.
func (a *auditor) checkDeletion(name string, u *unstructured.Unstructured, h *appHistory, rev int64) {
	ro := u.GetAnnotations()[v1alpha1.AnnotationDeleteRollout]
	if ro == "" {
		a.violations = append(a.violations, fmt.Sprintf("Application %s (UID %s) was deleted at etcd revision %d without %s: no Remove step prepared it", name, h.uid, rev, v1alpha1.AnnotationDeleteRollout))
		return
	}
	r := a.rollouts[ro]
	switch {
	case r == nil:
		a.violations = append(a.violations, fmt.Sprintf("Application %s (UID %s) was deleted at etcd revision %d for rollout %s, which was never stored", name, h.uid, rev, ro))
	case !r.approved:
		a.violations = append(a.violations, fmt.Sprintf("Application %s (UID %s) was deleted at etcd revision %d for rollout %s, which %s had not approved", name, h.uid, rev, ro, a.admin))
	case r.removeStarted[name] == 0:
		a.violations = append(a.violations, fmt.Sprintf("Application %s (UID %s) was deleted at etcd revision %d for rollout %s, whose Remove step of %s had not started", name, h.uid, rev, ro, name))
	case h.created > r.removeStarted[name]:
		a.violations = append(a.violations, fmt.Sprintf("the Remove step of %s in rollout %s (started at etcd revision %d) deleted a recreated namesake: UID %s, stored at revision %d", name, ro, r.removeStarted[name], h.uid, h.created))
	}
}

func (a *auditor) observeRollout(name string, raw []byte, rev int64, at time.Time) {
	var ro v1alpha1.RuntimeRollout
	if err := json.Unmarshal(raw, &ro); err != nil {
		a.violations = append(a.violations, fmt.Sprintf("RuntimeRollout %s at etcd revision %d: not JSON: %v", name, rev, err))
		return
	}
	r := a.rollouts[name]
	if r == nil {
		r = &rolloutRecord{removeStarted: map[string]int64{}}
		a.rollouts[name] = r
	}
	ap := ro.Spec.Approval
	r.approved = ap != nil && ap.ApprovedBy == a.admin && ap.Revoked == nil
	sig := []string{string(ro.Status.Phase)}
	a.checkSucceeded(name, &ro, rev)
	for _, st := range ro.Status.Steps {
		sig = append(sig, string(st.State))
		if st.Action == v1alpha1.ActionRemove && st.State != v1alpha1.StepPending && st.State != v1alpha1.StepAwaitingApproval && r.removeStarted[st.Release] == 0 {
			r.removeStarted[st.Release] = rev
		}
	}
	if s := strings.Join(sig, ","); s != r.signature {
		r.signature = s
		a.progress = append(a.progress, progressEvent{at: at, waiting: ro.Status.Phase == v1alpha1.PhaseAwaitingApproval, what: name + " " + s})
	}
}

func (a *auditor) observeLease(binary string, raw []byte) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		a.violations = append(a.violations, fmt.Sprintf("Lease aicr-%s: cannot decode: %v", binary, err))
		return
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil {
		return
	}
	recs := a.leases[binary]
	if n := len(recs); n > 0 && recs[n-1].holder == *l.Spec.HolderIdentity && recs[n-1].acquired.Equal(l.Spec.AcquireTime.Time) {
		return
	}
	a.leases[binary] = append(recs, leaseRecord{holder: *l.Spec.HolderIdentity, acquired: l.Spec.AcquireTime.Time})
}

// leaseHistory returns who acquired binary's Lease when, in order.
func (a *auditor) leaseHistory(binary string) []leaseRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.leases[binary])
}

// progressEvents returns the rollouts' progress, in order.
func (a *auditor) progressEvents() []progressEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.progress)
}

// report returns the violations and a summary.
func (a *auditor) report() ([]string, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	steps := 0
	for _, h := range a.apps {
		steps += len(h.steps)
	}
	transitions := 0
	for _, recs := range a.leases {
		transitions += max(0, len(recs)-1)
	}
	return slices.Clone(a.violations), fmt.Sprintf("%d Application writes stored, %d steps written over %d Applications, %d deletions, %d rollouts, %d rollout progress writes, %d leader hand-overs",
		a.writes, steps, len(a.apps), a.deletions, len(a.rollouts), len(a.progress), transitions)
}
