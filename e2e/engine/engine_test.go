//go:build e2e

package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// engineStartTimeout bounds installing Argo CD's CRDs and starting Argo CD on a loaded machine.
const engineStartTimeout = 3 * time.Minute

// Without Argo CD's CRDs the runtime reports EngineAvailable=False/EngineMissing, is not Ready,
// and no step starts; once the CRDs and Argo CD appear, readiness notices them, the runtime
// reports EngineAvailable=True and the example bundle rolls out.
//
// The runtime is created by a planner restarted after it had acknowledged readiness's report,
// with readiness down: the planner reads that report from the events stream, under its own
// NATS identity, and holds every step (a planner that knew nothing once started a step here).
func TestEngineMissingThenRolloutOnceArgoCDAppears(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	if _, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("listing Applications before Argo CD is installed: %v, want NotFound (no CRD)", err)
	}
	restartPlannerWithoutReadiness(t, s)
	readinessDown := true
	defer func() {
		if readinessDown { // the test failed before it started readiness again
			if err := s.StartBinary(context.Background(), v1alpha1.BinaryReadiness); err != nil {
				t.Error(err)
			}
		}
	}()
	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRuntime(ctx, stack.DefaultRuntimeSpec()); err != nil {
		t.Fatal(err)
	}
	rt, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionEngineAvailable, metav1.ConditionFalse, v1alpha1.ReasonEngineMissing)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EngineAvailable=False/%s: %s", v1alpha1.ReasonEngineMissing, meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionEngineAvailable).Message)
	// The planner resolved the plan and holds every step while the engine is missing.
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "a desired plan held back by the missing engine", func(ctx context.Context) (bool, error) {
		r, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		rt = r
		ready := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
		if r.Status.DesiredPlan == "" || ready == nil || ready.ObservedGeneration != r.Generation {
			return false, fmt.Errorf("desired plan %q, Ready %+v", r.Status.DesiredPlan, ready)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady); ready.Status != metav1.ConditionFalse || rt.Status.ActivePlan != "" {
		t.Fatalf("without the engine: Ready=%s/%s, active plan %q; want False and none", ready.Status, ready.Reason, rt.Status.ActivePlan)
	} else {
		t.Logf("without the engine: Ready=False/%s: %s", ready.Reason, ready.Message)
	}
	if rt.Status.Rollout != "" {
		ro, err := s.Rollout(ctx, rt.Status.Rollout)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range ro.Status.Steps {
			if st.StartedAt != nil || st.State != v1alpha1.StepPending {
				t.Errorf("engine missing, yet step %d %s is %s (started %v)", st.Index, st.Release, st.State, st.StartedAt)
			}
		}
	}

	if err := s.StartBinary(ctx, v1alpha1.BinaryReadiness); err != nil {
		t.Fatal(err)
	}
	readinessDown = false
	start, cancel := context.WithTimeout(ctx, engineStartTimeout)
	defer cancel()
	if err := s.StartArgoCD(start); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionEngineAvailable, metav1.ConditionTrue, v1alpha1.ReasonEngineAvailable); err != nil {
		t.Fatal(err)
	}
	rt, err = s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Status.Phase != v1alpha1.PhaseSucceeded || len(ro.Status.Steps) != len(stack.ExampleComponents()) {
		t.Fatalf("rollout %s: %s with %d steps, want Succeeded with %d", ro.Name, ro.Status.Phase, len(ro.Status.Steps), len(stack.ExampleComponents()))
	}
	for _, c := range stack.ExampleComponents() {
		app := stacktest.Application(t, s, c.Name)
		if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != s.Digests[c.Name] {
			t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", c.Name, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, s.Digests[c.Name])
		}
	}
}

// restartPlannerWithoutReadiness waits until readiness's engine report is on the events stream
// and the planner's consumer has acknowledged every event, then stops readiness and restarts
// the planner: the new planner's consumer delivers nothing, so only the stream can tell it
// what readiness said.
func restartPlannerWithoutReadiness(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := t.Context()
	js := stacktest.Observer(t, s, "e2e-engine")
	err := testenv.WaitFor(ctx, stacktest.ChangeTimeout, "readiness's engine report acknowledged by the planner", func(ctx context.Context) (bool, error) {
		m, err := dispatch.Last(ctx, js, bus.StreamEvents, bus.SubjectEngine)
		if err != nil || m == nil {
			return false, fmt.Errorf("engine report on the stream: %v, %v", m, err)
		}
		cons, err := js.Consumer(ctx, bus.StreamEvents, bus.ConsumerPlanner)
		if err != nil {
			return false, err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return false, fmt.Errorf("planner's consumer: %d pending, %d awaiting acknowledgement", info.NumPending, info.NumAckPending)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StopBinary(v1alpha1.BinaryReadiness, false); err != nil {
		t.Fatal(err)
	}
	if err := s.StopBinary(v1alpha1.BinaryPlanner, false); err != nil {
		t.Fatal(err)
	}
	if err := s.StartBinary(ctx, v1alpha1.BinaryPlanner); err != nil {
		t.Fatal(err)
	}
}
