//go:build e2e

package edges

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. Argo CD syncs one of the example charts in a few seconds on an idle machine;
// the rest is headroom for a loaded one.
const (
	// stepTimeout bounds waiting for one step to reach a state (written, judged, done).
	stepTimeout = 3 * time.Minute
	// restartTimeout bounds restarting a process of the environment.
	restartTimeout = 2 * time.Minute
	// promptTimeout bounds what the operator must do "within seconds" of a change it hears of
	// (a verdict, a result); the headroom is for a loaded machine.
	promptTimeout = time.Minute
)

// The bundle and spec the runtime points at, as the tests change them. Tests run in order and
// each leaves the runtime Ready at them.
var (
	components = stack.ExampleComponents()
	version    = 1
	spec       = stack.DefaultRuntimeSpec()
)

func bundle(t *testing.T, s *stack.Stack) []byte {
	t.Helper()
	raw, err := stack.BundleYAML("gpu-stack", fmt.Sprintf("1.0.%d", version), components, s.Digests)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rolledOut rolls the package's bundle and spec out (or checks they still are) and returns the
// Ready runtime.
func rolledOut(t *testing.T, s *stack.Stack) *v1alpha1.ClusterRuntime {
	t.Helper()
	return stacktest.RolledOut(t, s, bundle(t, s), spec)
}

// change writes the package's bundle as a new version, with the package's spec, to a runtime
// at plan from, and returns the rollout that moves it to the new plan once it exists.
func change(t *testing.T, s *stack.Stack, from string) *v1alpha1.RuntimeRollout {
	t.Helper()
	before, err := s.Runtime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	version++
	if err := s.ApplyBundle(t.Context(), bundle(t, s)); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return s.ApplyRuntime(t.Context(), spec) }); err != nil {
		t.Fatal(err)
	}
	// The plan desired before the change (an earlier rollout's, failed) is not the new one.
	return stacktest.NewRollout(t, s, from, before.Status.DesiredPlan)
}

// stepID is "<rollout>/<index>".
func stepID(ro *v1alpha1.RuntimeRollout, st v1alpha1.Step) string {
	return v1alpha1.StepID(ro.Name, st.Index)
}

// errStop ends a wait at once: what was seen means the awaited state will not come.
var errStop = errors.New("will not happen")

// waitStep waits until cond holds for the rollout's step of release and returns the rollout.
// cond returns nil when satisfied, an error wrapping errStop to fail at once, any other error
// to keep waiting (the last one is reported).
func waitStep(t *testing.T, s *stack.Stack, rollout, release string, timeout time.Duration, what string, cond func(ro *v1alpha1.RuntimeRollout, st v1alpha1.Step) error) *v1alpha1.RuntimeRollout {
	t.Helper()
	var last *v1alpha1.RuntimeRollout
	var stopped error
	err := testenv.WaitFor(t.Context(), timeout, "step "+release+" of "+rollout+": "+what, func(ctx context.Context) (bool, error) {
		ro, err := s.Rollout(ctx, rollout)
		if err != nil {
			return false, err
		}
		last = ro
		st, ok := stacktest.FindStep(ro, release)
		if !ok {
			stopped = fmt.Errorf("rollout %s has no step for %s", rollout, release)
			return true, nil
		}
		if err := cond(ro, st); err != nil {
			if errors.Is(err, errStop) {
				stopped = err
				return true, nil
			}
			return false, err
		}
		return true, nil
	})
	if stopped != nil {
		err = stopped
	}
	if err != nil {
		t.Fatalf("%v\nrollout: %s", err, stacktest.DescribeRollout(last))
	}
	return last
}

// waitOutcome waits until the rollout ended and returns it.
func waitOutcome(t *testing.T, s *stack.Stack, rollout string, timeout time.Duration) *v1alpha1.RuntimeRollout {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(t.Context(), timeout, "rollout "+rollout+" ended", func(ctx context.Context) (bool, error) {
		r, err := s.Rollout(ctx, rollout)
		if err != nil {
			return false, err
		}
		ro = r
		if r.Status.Outcome == "" {
			return false, fmt.Errorf("phase %s", r.Status.Phase)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\nrollout: %s", err, stacktest.DescribeRollout(ro))
	}
	return ro
}

// fence returns the named fence of a verdict.
func fence(v *v1alpha1.Verdict, name string) v1alpha1.Fence {
	if v != nil {
		for _, f := range v.Fences {
			if f.Name == name {
				return f
			}
		}
	}
	return v1alpha1.Fence{Name: name}
}

// rv parses a resourceVersion (an etcd revision on the local stack).
func rv(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an etcd revision: %v", s, err)
	}
	return n
}

// has reports whether msg contains every part.
func has(msg string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			return false
		}
	}
	return true
}

// stopPlanner stops the planner (no drift loop, no rollout runs) and returns the function that
// starts it again; the test's cleanup calls it too.
func stopPlanner(t *testing.T, s *stack.Stack) (start func()) {
	t.Helper()
	if err := s.StopBinary(v1alpha1.BinaryPlanner, false); err != nil {
		t.Fatal(err)
	}
	down := true
	start = func() {
		if !down {
			return
		}
		down = false
		ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
		defer cancel()
		if err := s.StartBinary(ctx, v1alpha1.BinaryPlanner); err != nil {
			t.Fatalf("start the planner again: %v", err)
		}
	}
	t.Cleanup(start)
	return start
}

// reasonEvents returns the planner's Events of a reason, by name, with their message and count.
func reasonEvents(t *testing.T, s *stack.Stack, reason string) map[string]string {
	t.Helper()
	return plannerEvents(t, s, func(e *corev1.Event) bool { return e.Reason == reason })
}

// plannerEvents returns the planner's Events that keep accepts, by name, with their message
// and count.
func plannerEvents(t *testing.T, s *stack.Stack, keep func(*corev1.Event) bool) map[string]string {
	t.Helper()
	list, err := s.Kube.CoreV1().Events(stack.OperatorNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i := range list.Items {
		if e := &list.Items[i]; keep(e) {
			out[e.Name] = fmt.Sprintf("%s (count %d)", e.Message, e.Count)
		}
	}
	return out
}

// rolloutUIDs returns every RuntimeRollout's name by UID.
func rolloutUIDs(t *testing.T, s *stack.Stack) map[types.UID]string {
	t.Helper()
	list, err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[types.UID]string, len(list.Items))
	for _, u := range list.Items {
		out[u.GetUID()] = u.GetName()
	}
	return out
}

// unschedule deletes the release's pods with the stack's one node cordoned, until the returned
// function or the test's end uncordons it: they cannot come back, so the release stops being
// ready.
func unschedule(t *testing.T, s *stack.Stack, ns, rel string) (uncordon func()) {
	t.Helper()
	cordon := func(on bool) {
		patch := `{"spec":{"unschedulable":` + map[bool]string{true: "true", false: "null"}[on] + `}}`
		if _, err := s.Kube.CoreV1().Nodes().Patch(context.Background(), s.Env.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: stacktest.Person}); err != nil {
			t.Fatalf("cordon=%v node %s: %v", on, s.Env.NodeName, err)
		}
	}
	cordon(true)
	t.Cleanup(func() { cordon(false) })
	if err := s.Kube.CoreV1().Pods(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + rel}); err != nil {
		t.Fatalf("delete the pods of %s: %v", rel, err)
	}
	return func() { cordon(false) }
}
