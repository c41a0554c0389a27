//go:build integration

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// journal records, in order, the planner's writes to the API server and its commands.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

// since returns the entries recorded from mark on.
func (j *journal) since(mark int) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries[mark:])
}

func (j *journal) mark() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.entries)
}

// journalStore is a Store that records every write it passes on.
type journalStore struct {
	Store
	j *journal
}

func (s journalStore) UpdateRuntime(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	s.j.add("update runtime")
	return s.Store.UpdateRuntime(ctx, rt)
}

func (s journalStore) UpdateRuntimeStatus(ctx context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	s.j.add("runtime status %s", rt.Status.ActivePlan)
	return s.Store.UpdateRuntimeStatus(ctx, rt)
}

func (s journalStore) CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	s.j.add("create rollout")
	return s.Store.CreateRollout(ctx, r)
}

func (s journalStore) UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	s.j.add("update rollout")
	return s.Store.UpdateRollout(ctx, r)
}

func (s journalStore) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	s.j.add("rollout status")
	return s.Store.UpdateRolloutStatus(ctx, r)
}

func (s journalStore) DeleteRollout(ctx context.Context, name, uid string) error {
	s.j.add("delete rollout")
	return s.Store.DeleteRollout(ctx, name, uid)
}

func (s journalStore) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	role := cm.Labels[v1alpha1.LabelRole]
	if role == "" {
		role = cm.Name
	}
	s.j.add("create configmap %s", role)
	return s.Store.CreateConfigMap(ctx, cm)
}

// journalPublisher records every command it passes on.
type journalPublisher struct {
	Publisher
	j *journal
}

func (p journalPublisher) Publish(ctx context.Context, subject, id string, m bus.Envelope) error {
	p.j.add("command %s", subject)
	return p.Publisher.Publish(ctx, subject, id, m)
}

// TestARolloutsStartAndEndCostFewWrites pins the API requests that stand between a bundle
// change and the rollout's first command, and between the last verdict and the runtime's
// Ready: each is a step of the critical path the 30-release overhead of make bench measures.
// A bundle change costs the plan's ConfigMap, the rollout, its steps' ConfigMap and one status
// write (steps filled and the first started together) before the first command, and no write
// of the runtime (Resolving is said only of a slow resolution). The last verdict costs the
// rollout's status, then the runtime's; the ended rollout's outcome label comes after.
func TestARolloutsStartAndEndCostFewWrites(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	j := &journal{}
	bundle := func(ver int) map[string]string {
		return map[string]string{"bundle.yaml": bundleYAML(t, []map[string]any{component("rq-a", ver), component("rq-b", ver, "rq-a")})}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "requests-bundle", Namespace: ns}, Data: bundle(1)}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "requests-bundle"}}}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	stop := h.startPlannerOn(nil, journalStore{Store: h.kube, j: j}, journalPublisher{Publisher: bus.NewPublisher(h.js, "planner"), j: j})
	defer func() { stop() }()
	defer h.deleteRuntime()

	rolledOut := func(what string, first *v1alpha1.ClusterRuntime) *v1alpha1.ClusterRuntime {
		t.Helper()
		return h.waitRuntime(what, func(rt *v1alpha1.ClusterRuntime) bool {
			return rt.Status.ActivePlan != "" && (first == nil || rt.Status.ActivePlan != first.Status.ActivePlan) &&
				condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
		})
	}
	h.answer(h.mustNext())
	h.answer(h.mustNext())
	installed := rolledOut("the install rolled out", nil)
	// Quiet: the install's rollout carries its outcome label, the runtime its status.
	h.waitRollout(installed.Status.Rollout, func(r *v1alpha1.RuntimeRollout) bool {
		return r.Labels[v1alpha1.LabelOutcome] == v1alpha1.OutcomeSucceeded
	})

	mark := j.mark()
	cm.Data = bundle(2)
	if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := h.mustNext()
	start := upTo(j.since(mark), "command ")
	want := []string{"create configmap " + v1alpha1.PlanRoleValue, "create rollout", "create configmap " + v1alpha1.StepsRoleValue, "rollout status", "command " + bus.ApplySubject(h.name, "rq-a")}
	if !slices.Equal(start, want) {
		t.Fatalf("from the bundle change to the first command the planner did\n  %s\nwant\n  %s", strings.Join(start, "\n  "), strings.Join(want, "\n  "))
	}
	h.answer(first)
	last := h.mustNext()
	mark = j.mark()
	h.answer(last)
	upgraded := rolledOut("the upgrade rolled out", installed)
	h.waitRollout(upgraded.Status.Rollout, func(r *v1alpha1.RuntimeRollout) bool {
		return r.Labels[v1alpha1.LabelOutcome] == v1alpha1.OutcomeSucceeded
	})
	end := j.since(mark)
	// The runtime status that makes the new plan active is the one that says Ready at it: the
	// rollout's end is written just before it, the label after. A progress refresh of the
	// runtime, queued by an earlier rollout event and on a slow machine still on its way when
	// the second command is seen, may come before the rollout's end; it is not at the new plan.
	runtimeAt, labelAt := slices.Index(end, "runtime status "+upgraded.Status.ActivePlan), slices.Index(end, "update rollout")
	if runtimeAt < 1 || end[runtimeAt-1] != "rollout status" || labelAt < runtimeAt {
		t.Fatalf("from the last verdict to the outcome label the planner did\n  %s\nwant the rollout's status, then the runtime's, then the label", strings.Join(end, "\n  "))
	}
}

// upTo returns entries up to and including the first with prefix (all when none has it).
func upTo(entries []string, prefix string) []string {
	for i, e := range entries {
		if strings.HasPrefix(e, prefix) {
			return entries[:i+1]
		}
	}
	return entries
}

// waitRollout waits until the rollout name satisfies cond and returns it as read then.
func (h *harness) waitRollout(name string, cond func(r *v1alpha1.RuntimeRollout) bool) *v1alpha1.RuntimeRollout {
	h.t.Helper()
	var seen *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(context.Background(), statusTimeout, "rollout "+name, func(ctx context.Context) (bool, error) {
		r, err := h.kube.GetRollout(ctx, name)
		if err != nil {
			return false, err
		}
		seen = r
		return cond(r), nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return seen
}
