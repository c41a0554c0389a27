//go:build chaos || e2e

package chaos

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// The audits at the end of a run, the fake-Argo CD test's and the real-Argo CD variant's.

// listRollouts reads every rollout with all its steps.
func listRollouts(t *testing.T, s *stack.Stack) []v1alpha1.RuntimeRollout {
	t.Helper()
	var list *unstructured.UnstructuredList
	retry(t, "list the rollouts", func(ctx context.Context) (err error) {
		list, err = s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).List(ctx, metav1.ListOptions{})
		return err
	})
	var out []v1alpha1.RuntimeRollout
	for _, u := range list.Items {
		var ro *v1alpha1.RuntimeRollout
		retry(t, "read rollout "+u.GetName(), func(ctx context.Context) (err error) {
			ro, err = s.DecodeRollout(ctx, &u)
			return err
		})
		out = append(out, *ro)
	}
	return out
}

// auditQueues checks, once the faults ended, that no command was lost (commandsAnswered) and
// that nothing is parked.
func auditQueues(t *testing.T, s *stack.Stack, all []v1alpha1.RuntimeRollout) {
	t.Helper()
	ctx := t.Context()
	violations, read, err := commandsAnswered(ctx, s, all)
	if err != nil {
		t.Errorf("command audit: %v", err)
	} else {
		t.Logf("command audit: %d results read; every step %d rollouts started was answered, but %d", read, len(all), len(violations))
	}
	for _, v := range violations {
		t.Error(v)
	}
	// Nothing parked: every fault ends, so a command that failed under one (refused, throttled,
	// cut off) was redelivered until it passed; one parked is one given up on too early.
	if st, err := dispatch.ReadParked(ctx, stacktest.Observer(t, s, "chaos-parked"), 5); err != nil {
		t.Errorf("parked audit: %v", err)
	} else {
		t.Logf("parked audit: %d messages parked", st.Total)
		for _, p := range st.Oldest {
			t.Errorf("message parked under faults that all ended: #%d %s, %s gave up after %d failures: %s", p.Seq, p.Subject, p.Consumer, p.Failures, p.Error)
		}
	}
}

// auditRecords reports the faults and their stalls (failing a kind above bound, unless it is 0)
// and checks what the run recorded, once the supervisor and the etcd audit stopped: the
// supervisor's violations, the etcd audit's, the lease audit of the kube-apiserver's log, and
// the log scan of every process. It returns the lines and logs scanned and the scan's findings.
func auditRecords(t *testing.T, s *stack.Stack, m *monkey, audit *auditor, windows [][2]time.Time, bound time.Duration, auditStart time.Time) (lines, logs, found int) {
	t.Helper()
	for _, v := range m.report(t.Logf, audit.progressEvents(), windows, bound) {
		t.Error(v)
	}
	for _, v := range m.violations {
		t.Error(v)
	}
	etcdViolations, summary := audit.report()
	t.Logf("etcd audit: %s; %s", summary, audit.syncSummary())
	for _, v := range etcdViolations {
		t.Error(v)
	}
	leaseViolations, checked, panics, err := leaseWrites(s.AuditLog(), auditStart, audit.leaseHistory)
	if err != nil {
		t.Errorf("kube-apiserver audit: %v", err)
	}
	t.Logf("kube-apiserver audit: %d writes of leader-elected processes, each while it held its lease", checked-len(leaseViolations))
	for _, v := range append(leaseViolations, panics...) {
		t.Error(v)
	}
	findings, lines, logs, err := scanLogs(s.Dir + "/logs")
	if err != nil {
		t.Errorf("log scan: %v", err)
	}
	for _, f := range findings {
		t.Error(f)
	}
	return lines, logs, len(findings)
}
