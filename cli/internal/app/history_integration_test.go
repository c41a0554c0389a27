//go:build integration

package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// recordEvent writes an Event as the planner's recorder does: about a cluster-scoped object of the
// operator's, in the operator namespace (involvedObject.namespace set to it).
func recordEvent(t *testing.T, kc kubernetes.Interface, namespace, kind, name, uid, typ, reason, msg string, at time.Time) {
	t.Helper()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + ".", Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: kind, APIVersion: v1alpha1.SchemeGroupVersion.String(), Name: name,
			UID: types.UID(uid), Namespace: namespace},
		Type: typ, Reason: reason, Message: msg, Count: 1,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
		Source: corev1.EventSource{Component: "aicr-planner"},
	}
	created, err := kc.CoreV1().Events(namespace).Create(context.Background(), ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event: %v", err)
	}
	t.Cleanup(func() {
		_ = kc.CoreV1().Events(namespace).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
}

// events reads the planner's Events from the operator namespace, oldest first, narrowed by
// --for; Events elsewhere (namespace default, where an older planner put them) and about other
// kinds are not shown.
func TestEvents(t *testing.T) {
	env := testenv.Current(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(t, env, opNamespace)
	now := time.Now()
	recordEvent(t, kc, opNamespace, v1alpha1.KindRuntimeRollout, "r-ev-1", "u1", corev1.EventTypeNormal, "RolloutCreated", "rollout r-ev-1 created: 2 steps", now.Add(-3*time.Minute))
	recordEvent(t, kc, opNamespace, v1alpha1.KindRuntimeRollout, "r-ev-1", "u1", corev1.EventTypeWarning, "StepFailed", "step 1/2 gpu-operator (Upgrade) failed: RolloutFailed", now.Add(-time.Minute))
	recordEvent(t, kc, opNamespace, v1alpha1.KindClusterRuntime, "cluster", "u0", corev1.EventTypeWarning, "RolloutFailed", "rollout r-ev-1 failed", now.Add(-2*time.Minute))
	recordEvent(t, kc, opNamespace, v1alpha1.KindRuntimeRollout, "r-ev-2", "u2", corev1.EventTypeNormal, "RolloutCreated", "rollout r-ev-2 created", now.Add(-4*time.Minute))
	// Not the operator's: a ConfigMap's Event in the operator namespace, and one in default.
	other := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm.", Namespace: opNamespace},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "r-ev-1", Namespace: opNamespace},
		Type:           corev1.EventTypeNormal, Reason: "NotOurs", Message: "x", LastTimestamp: metav1.NewTime(now)}
	if _, err := kc.CoreV1().Events(opNamespace).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recordEvent(t, kc, "default", v1alpha1.KindRuntimeRollout, "r-ev-1", "u1", corev1.EventTypeNormal, "InDefault", "old place", now)

	code, stdout, stderr := kubectl(t, env, "events")
	if code != 0 {
		t.Fatalf("events: exit %d: %s", code, stderr)
	}
	order := []string{"rollout r-ev-2 created", "rollout r-ev-1 created: 2 steps", "rollout r-ev-1 failed", "step 1/2 gpu-operator (Upgrade) failed"}
	at := -1
	for _, want := range order {
		i := strings.Index(stdout, want)
		if i <= at {
			t.Fatalf("events: %q missing or out of order (oldest first):\n%s", want, stdout)
		}
		at = i
	}
	for _, unwanted := range []string{"NotOurs", "InDefault"} {
		if strings.Contains(stdout, unwanted) {
			t.Errorf("events shows %s:\n%s", unwanted, stdout)
		}
	}
	if !strings.Contains(stdout, "clusterruntime/cluster") || !strings.Contains(stdout, "runtimerollout/r-ev-1") || !strings.Contains(stdout, "Warning") {
		t.Errorf("events text lacks the object or the type:\n%s", stdout)
	}

	code, stdout, stderr = kubectl(t, env, "events", "--for", "rollout/r-ev-1", "-o", "json")
	if code != 0 {
		t.Fatalf("events --for: exit %d: %s", code, stderr)
	}
	var list struct {
		Kind  string         `json:"kind"`
		Items []corev1.Event `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("events -o json: %v\n%s", err, stdout)
	}
	var reasons []string
	for _, ev := range list.Items {
		reasons = append(reasons, ev.Reason)
	}
	if list.Kind != "List" || strings.Join(reasons, ",") != "RolloutCreated,StepFailed" {
		t.Errorf("events --for rollout/r-ev-1 -o json: kind %q, reasons %v; want a List of RolloutCreated,StepFailed", list.Kind, reasons)
	}
	if code, stdout, _ := kubectl(t, env, "events", "--for", "runtime/cluster", "-o", "name"); code != 0 || strings.Count(stdout, "\n") != 1 {
		t.Errorf("events --for runtime/cluster -o name: exit %d, %q; want one Event", code, stdout)
	}
	if code, _, stderr := kubectl(t, env, "events", "--for", "pod/x"); code != 2 || !strings.Contains(stderr, `--for "pod/x": use KIND/NAME with KIND one of runtimerollout (rollout) or clusterruntime (runtime)`) {
		t.Errorf("events --for pod/x: exit %d, %q", code, stderr)
	}
}

// ended is a rollout of digestA -> digestB that ended with outcome.
func ended(name, uid, outcome string, created time.Time) *v1alpha1.RuntimeRollout {
	ro := removeRollout(name, created)
	ro.Spec.RuntimeUID = uid
	started := metav1.NewTime(created.Add(time.Second))
	finished := metav1.NewTime(created.Add(95 * time.Second))
	phase := map[string]v1alpha1.RolloutPhase{v1alpha1.OutcomeFailed: v1alpha1.PhaseFailed, v1alpha1.OutcomeExpired: v1alpha1.PhaseExpired,
		v1alpha1.OutcomeSucceeded: v1alpha1.PhaseSucceeded, v1alpha1.OutcomeRevoked: v1alpha1.PhaseRevoked}[outcome]
	ro.Status = v1alpha1.RuntimeRolloutStatus{Phase: phase, Outcome: outcome, StartedAt: &started, FinishedAt: &finished,
		Steps: []v1alpha1.Step{{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepFailed}}}
	if outcome == v1alpha1.OutcomeSucceeded {
		ro.Status.Steps[0].State = v1alpha1.StepSucceeded
	}
	return ro
}

// history lists the runtime's rollouts newest first, with plans, outcome, who approved and the
// duration; retry deletes only a failed or expired current rollout, exactly as it was read.
func TestHistoryAndRetry(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	rtu := ensureRuntime(t, env, "gpu-stack")
	uid := string(rtu.GetUID())
	older := ended("r-hist-old", uid, v1alpha1.OutcomeSucceeded, time.Now().Add(-time.Hour))
	older.Spec.FromDigest, older.Spec.ToDigest = "", digestA
	createRollout(t, dyn, older)
	// Created within one second (creation timestamps' precision), the two are ordered by their
	// first step's start.
	failed := ended("r-hist-new", uid, v1alpha1.OutcomeFailed, time.Now().Add(-10*time.Minute))
	failed.Spec.Approval = &v1alpha1.Approval{ApprovedBy: "alice", Reason: "moved"}
	createRollout(t, dyn, failed)
	st := rollingOut("r-hist-new")
	setRuntimeStatus(t, env, st)

	code, stdout, stderr := kubectl(t, env, "history")
	if code != 0 {
		t.Fatalf("history: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("history: %d lines, want a header, two rollouts and the legend:\n%s", len(lines), stdout)
	}
	for i, want := range [][]string{
		{"ROLLOUT", "FROM", "TO", "RESULT", "APPROVED BY", "DURATION"},
		{"* r-hist-new", "aaaaaaaaaaaa", "bbbbbbbbbbbb", "PlanChanged", "RolloutFailed", "0/1", "alice", "94s"},
		{"  r-hist-old", "none", "aaaaaaaaaaaa", "RolloutSucceeded (active)", "1/1", "-"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("history line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if code, stdout, _ := kubectl(t, env, "history", "-o", "jsonpath={.items[0].toPlan} {.items[0].approvedBy} {.items[1].active}"); code != 0 || stdout != digestB+" alice true" {
		t.Errorf("history -o jsonpath: exit %d, %q", code, stdout)
	}

	// retry refuses what it may not retry, and deletes nothing then.
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"a succeeded rollout", "r-hist-old succeeded: there is nothing to retry", []string{"retry", "r-hist-old"}},
		{"a stale resourceVersion", "not 1 (--resource-version): it changed since you looked", []string{"retry", "r-hist-new", "--resource-version", "1"}},
	} {
		if code, _, stderr := kubectl(t, env, c.args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("retry %s: exit %d, %q; want exit 1, %q", c.name, code, stderr, c.want)
		}
	}
	moved := st
	moved.DesiredPlan = "sha256:" + strings.Repeat("c", 64)
	setRuntimeStatus(t, env, moved)
	if code, _, stderr := kubectl(t, env, "retry", "r-hist-new"); code != 1 || !strings.Contains(stderr, "but the runtime now wants plan sha256:cccc") {
		t.Errorf("retry after the runtime moved on: exit %d, %q", code, stderr)
	}
	setRuntimeStatus(t, env, st)

	rv := getRollout(t, dyn, "r-hist-new").ResourceVersion
	code, stdout, stderr = kubectl(t, env, "retry", "r-hist-new", "--resource-version", rv)
	if code != 0 || !strings.Contains(stdout, "runtimerollout r-hist-new (RolloutFailed) deleted at resourceVersion "+rv) {
		t.Fatalf("retry: exit %d, %q, %q", code, stdout, stderr)
	}
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Get(context.Background(), "r-hist-new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after retry the failed rollout is still there: %v", err)
	}
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Get(context.Background(), "r-hist-old", metav1.GetOptions{}); err != nil {
		t.Errorf("retry touched another rollout: %v", err)
	}
	// The planner creates the same name again; a retry then finds it in flight and refuses.
	again := removeRollout("r-hist-new", time.Now())
	again.Spec.RuntimeUID = uid
	createRollout(t, dyn, again)
	if code, _, stderr := kubectl(t, env, "retry", "r-hist-new"); code != 1 || !strings.Contains(stderr, "is still in flight (phase AwaitingApproval)") {
		t.Errorf("retry of the new rollout in flight: exit %d, %q", code, stderr)
	}
}
