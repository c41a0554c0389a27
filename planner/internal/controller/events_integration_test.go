//go:build integration

package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// eventTimeout bounds the wait for an Event: the recorder writes them in the background.
const eventTimeout = 30 * time.Second

// objectEvents lists the Events about one cluster-scoped object the way `kubectl aicr events`
// finds them: in the operator namespace, by the involved object's name, namespace (the operator
// namespace), kind and UID. The list is of every namespace, so an Event recorded anywhere else
// (namespace default, where the recorder would put it by itself) is not found.
func (h *harness) objectEvents(ctx context.Context, kind, name string, uid types.UID) ([]corev1.Event, error) {
	sel := fmt.Sprintf("metadata.namespace=%s,involvedObject.name=%s,involvedObject.namespace=%s,involvedObject.kind=%s,involvedObject.uid=%s", ns, name, ns, kind, uid)
	l, err := h.core.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitEvents waits until the object has at least want[reason] Events of each reason, and returns
// them.
func (h *harness) waitEvents(kind, name string, uid types.UID, want map[string]int) []corev1.Event {
	h.t.Helper()
	var evs []corev1.Event
	err := testenv.WaitFor(context.Background(), eventTimeout, fmt.Sprintf("Events %v on %s %s", want, kind, name), func(ctx context.Context) (bool, error) {
		var err error
		if evs, err = h.objectEvents(ctx, kind, name, uid); err != nil {
			return false, err
		}
		got := map[string]int{}
		for _, ev := range evs {
			got[ev.Reason]++
		}
		for reason, n := range want {
			if got[reason] < n {
				return false, fmt.Errorf("%d %s Events, want %d", got[reason], reason, n)
			}
		}
		return true, nil
	})
	if err != nil {
		var seen []string
		for _, ev := range evs {
			seen = append(seen, fmt.Sprintf("%s %s x%d: %s", ev.Type, ev.Reason, ev.Count, ev.Message))
		}
		sort.Strings(seen)
		h.t.Fatalf("%v; Events:\n  %s", err, strings.Join(seen, "\n  "))
	}
	return evs
}

// TestEventsOnRuntimeAndRollout proves the planner's Events through client-go's recorder on a
// real API server: a step that failed at its action timeout and the rollout's creation and end
// are Events on the RuntimeRollout, found as `kubectl aicr events` finds them (in the
// operator namespace, from aicr-planner), and a step that started and succeeded is none (routine news is
// the planner's log, rollout.StepNews); the end and the creation are on the ClusterRuntime too;
// and an Event repeated is one Event with a count, not two.
func TestEventsOnRuntimeAndRollout(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	comps := []map[string]any{component("ev-a", 7), component("ev-b", 7, "ev-a")}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "events-bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, comps)}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle:  v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "events-bundle"}},
		Rollout: v1alpha1.RolloutSettings{ActionTimeout: &metav1.Duration{Duration: 3 * time.Second}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	stop := h.startPlanner()
	defer func() { stop() }()
	defer h.deleteRuntime()

	h.answer(h.mustNext()) // ev-a: written and ready
	if c := h.mustNext(); c.release != "ev-b" {
		t.Fatalf("second command for %s, want ev-b", c.release)
	} // ev-b: never answered, so it fails at the action timeout
	got := h.waitRuntime("runtime Stalled=True RolloutFailed", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionStalled) == v1alpha1.ReasonRolloutFailed
	})
	r, err := h.kube.GetRollout(ctx, got.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	evs := h.waitEvents("RuntimeRollout", r.Name, r.UID, map[string]int{EventRolloutCreated: 1,
		rollout.EventStepFailed: 1, v1alpha1.OutcomeFailed: 1})
	// The recorder sends a process's Events in the order they were recorded: the steps' starts
	// and ev-a's success came before ev-b's failure.
	for _, ev := range evs {
		if ev.Namespace != ns || ev.InvolvedObject.Namespace != ns || ev.Source.Component != EventComponent || ev.ReportingController != EventComponent {
			t.Errorf("Event %s in %q (about an object in %q) from %q/%q, want the operator namespace %s from %s", ev.Reason, ev.Namespace, ev.InvolvedObject.Namespace, ev.Source.Component, ev.ReportingController, ns, EventComponent)
		}
		switch ev.Reason {
		case rollout.EventStepFailed, v1alpha1.OutcomeFailed:
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "ev-b") {
				t.Errorf("%s Event %s %q, want a Warning naming ev-b", ev.Reason, ev.Type, ev.Message)
			}
		case rollout.EventStepStarted, rollout.EventStepSucceeded:
			t.Errorf("%s Event %q: a step's start and success are logged, not recorded as Events", ev.Reason, ev.Message)
		}
	}
	h.waitEvents("ClusterRuntime", h.name, got.UID, map[string]int{EventRolloutCreated: 1, v1alpha1.OutcomeFailed: 1})

	// The same refusal twice: client-go's correlator makes it one Event with count 2.
	for i := range 2 {
		res := &bus.ApplyResult{CommandID: fmt.Sprintf("repair/abc/%d/ev-a", i), Runtime: h.name, Release: "ev-a",
			Step: bus.StepRef{ID: "repair/abc/1"}, Action: v1alpha1.ActionApply, Outcome: bus.OutcomeForeign,
			Reason: v1alpha1.ReasonForeignObject, Message: "an Application ev-a exists that is not the operator's"}
		if err := h.pub.Publish(ctx, bus.AppliedSubject(h.name, "ev-a"), fmt.Sprintf("refusal/%d", i), res); err != nil {
			t.Fatal(err)
		}
	}
	err = testenv.WaitFor(ctx, eventTimeout, "one ForeignObject Event with count 2", func(ctx context.Context) (bool, error) {
		evs, err := h.objectEvents(ctx, "ClusterRuntime", h.name, got.UID)
		if err != nil {
			return false, err
		}
		var counts []int32
		for _, ev := range evs {
			if ev.Reason == v1alpha1.ReasonForeignObject {
				counts = append(counts, ev.Count)
			}
		}
		if len(counts) != 1 || counts[0] != 2 {
			return false, fmt.Errorf("ForeignObject Events with counts %v", counts)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deleteRuntime deletes the test's runtime (the only one a cluster may have), waits until the
// planner released it and deletes its rollouts, so the package's other tests start afresh.
func (h *harness) deleteRuntime() {
	h.t.Helper()
	ctx := context.Background()
	if err := h.kube.rc.Delete().Resource(resRuntimes).Name(h.name).Do(ctx).Error(); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("delete runtime %s: %v", h.name, err)
	}
	err := testenv.WaitFor(ctx, statusTimeout, "runtime "+h.name+" gone", func(ctx context.Context) (bool, error) {
		_, err := h.kube.GetRuntime(ctx, h.name)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	rollouts, err := h.kube.ListRollouts(ctx, h.name)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range rollouts {
		if err := h.kube.DeleteRollout(ctx, r.Name, string(r.UID)); err != nil && !apierrors.IsNotFound(err) {
			h.t.Fatalf("delete rollout %s: %v", r.Name, err)
		}
	}
}
