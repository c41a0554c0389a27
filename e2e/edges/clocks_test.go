//go:build e2e

package edges

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// envClockOffset is the planner's test-only clock offset (planner/internal/app.EnvTestClockOffset;
// the e2e module does not import the planner's internals).
const envClockOffset = "AICR_TEST_CLOCK_OFFSET"

// Commands are ordered by their tokens, never by the clocks of the planners that stamped them.
// Two planner replicas, one whose clock runs 5 s ahead (the leader) and one 5 s behind (a
// standby), hand a release over on real Argo CD: the one ahead starts a rollout's step of
// kubeflow-trainer and stops once its command is out (SIGTERM hands the lease over); a new
// bundle comes, and the one behind finishes the rollout (the applier writes the step) and starts
// the next one's step of the same release. By the replicas' clocks the second step began before
// the first (the test requires it, or it would prove nothing): an applier that took the later
// start as the later command would find the Application "written by a later step" and write
// nothing, and the second rollout would fail. Ordered by tokens, the second rollout writes the
// release and succeeds.
func TestPlannersWhoseClocksDisagreeHandAReleaseOver(t *testing.T) {
	s := stacktest.Need(t)
	rt := rolledOut(t, s)
	const release = "kubeflow-trainer"
	const leader, standby = v1alpha1.BinaryPlanner, v1alpha1.BinaryPlanner + "-1"
	ctx := t.Context()
	start := func(name, offset string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, restartTimeout)
		defer cancel()
		if err := s.StartBinaryWith(ctx, name, envClockOffset+"="+offset); err != nil {
			t.Fatalf("start %s with its clock %s off: %v", name, offset, err)
		}
	}
	t.Cleanup(func() { // the stack's one planner again, on the real clock
		ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
		defer cancel()
		for _, name := range []string{standby, leader} {
			if err := s.StopBinary(name, false); err != nil {
				t.Errorf("stop %s: %v", name, err)
			}
		}
		if err := s.StartBinary(ctx, leader); err != nil {
			t.Errorf("start the planner again: %v", err)
		}
	})
	if err := s.StopBinary(leader, false); err != nil {
		t.Fatal(err)
	}
	start(leader, "5s")
	waitLease(t, s, "held by the planner 5 s ahead", func(holder string) bool { return holder != "" && holder != standby })
	start(standby, "-5s")

	history := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	stacktest.SetValue(t, components, release, "clock", "ahead")
	first := change(t, s, rt.Status.ActivePlan)
	stacktest.StepOf(t, first, release, v1alpha1.ActionUpgrade)
	waitStep(t, s, first.Name, release, stepTimeout, "started", func(_ *v1alpha1.RuntimeRollout, st v1alpha1.Step) error {
		if st.StartedAt == nil {
			return fmt.Errorf("%s, not started", st.State)
		}
		return nil
	})

	// The leader stops once the step's command is out (SIGTERM releases the lease), and the next
	// bundle comes while the rollout is in flight: it waits for that rollout, which the standby
	// finishes.
	handOver := time.Now()
	if err := s.StopBinary(leader, false); err != nil {
		t.Fatal(err)
	}
	stacktest.SetValue(t, components, release, "clock", "behind")
	version++
	if err := s.ApplyBundle(ctx, bundle(t, s)); err != nil {
		t.Fatal(err)
	}
	waitLease(t, s, "taken over by the planner 5 s behind", func(holder string) bool { return holder == standby })
	t.Logf("lease handed over in %s", time.Since(handOver).Round(time.Millisecond))

	if done := waitOutcome(t, s, first.Name, stacktest.RolloutTimeout); done.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("the first rollout ended %s: %s", done.Status.Phase, stacktest.DescribeRollout(done))
	}
	var second *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the rollout after "+first.Name, func(ctx context.Context) (bool, error) {
		got, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		if got.Status.Rollout == "" || got.Status.Rollout == first.Name {
			return false, fmt.Errorf("rollout %q (%s)", got.Status.Rollout, stack.Blocker(got))
		}
		second, err = s.Rollout(ctx, got.Status.Rollout)
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.Spec.FromDigest != first.Spec.ToDigest {
		t.Fatalf("rollout %s goes from %s, want from the first rollout's plan %s", second.Name, second.Spec.FromDigest, first.Spec.ToDigest)
	}
	done := waitOutcome(t, s, second.Name, stacktest.RolloutTimeout)
	if done.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("the rollout started by the planner 5 s behind ended %s: %s", done.Status.Phase, stacktest.DescribeRollout(done))
	}
	st2 := stacktest.StepOf(t, done, release, v1alpha1.ActionUpgrade)
	ended := waitOutcome(t, s, first.Name, stacktest.RolloutTimeout) // its steps as stored
	st1 := stacktest.StepOf(t, ended, release, v1alpha1.ActionUpgrade)
	if st1.StartedAt == nil || st2.StartedAt == nil {
		t.Fatalf("steps without a start: %s; %s", stacktest.DescribeRollout(ended), stacktest.DescribeRollout(done))
	}
	_, written, ok := history.FirstApp(t, release, func(a *argoapp.Application) bool {
		return a.Annotations[v1alpha1.AnnotationStep] == stepID(ended, st1)
	})
	if !ok {
		t.Fatalf("no recorded version of %s was written by %s", release, stepID(ended, st1))
	}
	firstSeq := written.Annotations[v1alpha1.AnnotationStepSeq]
	t.Logf("step starts by the planners' clocks: %s at %s (5 s ahead), %s at %s (5 s behind); tokens %s, %s",
		stepID(ended, st1), st1.StartedAt.UTC().Format(time.RFC3339), stepID(done, st2), st2.StartedAt.UTC().Format(time.RFC3339),
		firstSeq, stacktest.Application(t, s, release).Annotations[v1alpha1.AnnotationStepSeq])
	if !st2.StartedAt.Before(st1.StartedAt) {
		t.Errorf("the later step is stamped %s, not before the earlier one's %s: the hand-over took 10 s or more, and the clocks' disagreement did not invert the starts this test needs",
			st2.StartedAt.UTC().Format(time.RFC3339), st1.StartedAt.UTC().Format(time.RFC3339))
	}
	app := stacktest.Application(t, s, release)
	if app.Annotations[v1alpha1.AnnotationStep] != stepID(done, st2) || stacktest.Values(t, app.Spec.Source)["clock"] != "behind" {
		t.Errorf("%s after both rollouts: %s; want the second rollout's step and values", release, stacktest.DescribeApp(app))
	}
	if c, ok := v1alpha1.CompareSeq(app.Annotations[v1alpha1.AnnotationStepSeq], firstSeq); !ok || c <= 0 {
		t.Errorf("the second rollout's token %q is not after the first's %q", app.Annotations[v1alpha1.AnnotationStepSeq], firstSeq)
	}
	rolledOut(t, s)
}

// waitLease waits until the planner's Lease's holder satisfies cond.
func waitLease(t *testing.T, s *stack.Stack, what string, cond func(holder string) bool) {
	t.Helper()
	name := v1alpha1.LeaseName(v1alpha1.BinaryPlanner)
	err := testenv.WaitFor(t.Context(), restartTimeout, "lease "+name+" "+what, func(ctx context.Context) (bool, error) {
		l, err := s.Kube.CoordinationV1().Leases(stack.OperatorNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var holder string
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if !cond(holder) {
			return false, fmt.Errorf("held by %q", holder)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
