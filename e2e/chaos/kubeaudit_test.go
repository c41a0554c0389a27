//go:build chaos || e2e

package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
)

// leaseTolerance is how close to a hand-over a write may be and still count as the new or the
// old leader's: the Lease's acquireTime and the audit's timestamps come from one clock, but the
// new leader stamps acquireTime before its write reaches etcd.
const leaseTolerance = 500 * time.Millisecond

// leaderElected are the binaries that run as candidates of a Lease.
var leaderElected = []string{"planner", "readiness", "credrefresher"}

// auditEvent is what the check reads of a kube-apiserver audit event (audit.k8s.io/v1 Event).
type auditEvent struct {
	Kind             string `json:"kind"`
	Stage            string `json:"stage"`
	Verb             string `json:"verb"`
	RequestURI       string `json:"requestURI"`
	ImpersonatedUser *struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// leaseWrites checks the kube-apiserver's audit log (every write but Lease renewals, with the
// instance that made it): a process of a leader-elected binary writes only while it holds the
// binary's Lease. A write by an instance when another had acquired the Lease (leaseTolerance
// before) is a leader that lost its lease, a paused one woken up, still acting. It returns the
// violations, the number of leader writes since since checked, and the apiserver panics the log
// records.
func leaseWrites(path string, since time.Time, history func(binary string) []leaseRecord) (violations []string, checked int, panics []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("read the audit log: %w", err)
	}
	defer f.Close()
	hist := map[string][]leaseRecord{}
	for _, b := range leaderElected {
		hist[b] = history(b)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"kind":"Event"`)) {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			continue // the apiserver's own output interleaved: not an event
		}
		if ev.Stage == "Panic" {
			panics = append(panics, fmt.Sprintf("kube-apiserver panicked serving %s %s", ev.Verb, ev.RequestURI))
		}
		if ev.RequestReceived.Before(since) || ev.ImpersonatedUser == nil || len(ev.ImpersonatedUser.Extra[stack.InstanceExtra]) != 1 {
			continue
		}
		instance := ev.ImpersonatedUser.Extra[stack.InstanceExtra][0]
		binary := stack.BinaryOf(instance)
		if !slices.Contains(leaderElected, binary) {
			continue
		}
		checked++
		if v := leaseViolation(hist[binary], instance, ev.RequestReceived); v != "" {
			what := ev.Verb + " " + ev.RequestURI
			if ev.ResponseStatus != nil {
				what += fmt.Sprintf(" (answered %d)", ev.ResponseStatus.Code)
			}
			violations = append(violations, fmt.Sprintf("%s wrote without the lease at %s: %s; %s", instance, ev.RequestReceived.Format(time.RFC3339Nano), what, v))
		}
	}
	if err := sc.Err(); err != nil {
		return violations, checked, panics, fmt.Errorf("read the audit log: %w", err)
	}
	return violations, checked, panics, nil
}

// leaseViolation says why instance did not hold the lease at t, or "" when it did (or took it
// over within leaseTolerance).
func leaseViolation(recs []leaseRecord, instance string, t time.Time) string {
	var cur *leaseRecord
	for i := range recs {
		if recs[i].acquired.After(t.Add(leaseTolerance)) {
			break
		}
		cur = &recs[i]
	}
	switch {
	case cur == nil:
		return "nobody had acquired the lease yet"
	case cur.holder == instance || cur.acquired.After(t.Add(-leaseTolerance)):
		return ""
	}
	return fmt.Sprintf("%s had acquired it at %s", cur.holder, cur.acquired.Format(time.RFC3339Nano))
}
