package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func TestExpectedPlan(t *testing.T) {
	t.Parallel()
	const active, failedTo, next = "sha256:active", "sha256:failed", "sha256:next"
	started := metav1.Now()
	h := Holding{
		Digests: map[string]string{"a": active, "b": active, "c": failedTo, "d": active},
		Unsure:  map[string]bool{"b": true},
	}
	inflight := &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "r-next", UID: "uid-next"},
		Spec:       v1alpha1.RuntimeRolloutSpec{ToDigest: next},
		Status: v1alpha1.RuntimeRolloutStatus{Steps: []v1alpha1.Step{
			{Index: 1, Release: "a", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepInProgress, StartedAt: &started},
			{Index: 2, Release: "d", Action: v1alpha1.ActionRemove, State: v1alpha1.StepInProgress, StartedAt: &started},
			{Index: 3, Release: "c", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepPending},
		}},
	}
	judged := inflight.DeepCopy() // readiness judged an Application step 1 wrote
	judged.Status.Steps[0].Verdict = &v1alpha1.Verdict{ResourceVersion: "7"}
	ours := func(digest string) Live { return Live{Exists: true, PlanDigest: digest, PlanDigestOurs: true} }
	tests := map[string]struct {
		inflight *v1alpha1.RuntimeRollout
		release  string
		live     Live
		want     string
		judge    bool
	}{
		"a release at the active plan":                                   {release: "a", live: ours(active), want: active, judge: true},
		"a release a failed rollout moved, at that rollout's plan":       {release: "c", live: ours(failedTo), want: failedTo, judge: true},
		"the operator's write names another plan: judged there":          {release: "c", live: ours(active), want: active, judge: true},
		"a release whose plan-digest someone else took":                  {release: "c", live: Live{Exists: true, PlanDigest: active}, want: failedTo, judge: true},
		"an unsure release the failed step wrote keeps its plan":         {release: "b", live: ours(failedTo), want: failedTo, judge: true},
		"an unsure release the failed step never wrote":                  {release: "b", live: ours(active), want: active, judge: true},
		"an unsure release whose plan-digest someone else took":          {release: "b", live: Live{Exists: true, PlanDigest: failedTo}, want: active, judge: true},
		"an unsure release whose plan-digest names a third plan":         {release: "b", live: ours(next), want: next, judge: true},
		"a deleted release is judged against what it holds":              {release: "c", live: Live{}, want: failedTo, judge: true},
		"a release the stack does not hold is not judged":                {release: "x", live: ours(active)},
		"the step in flight has written it: its rollout's plan":          {inflight: inflight, release: "a", live: Live{Exists: true, Step: "r-next/1", StepRolloutUID: "uid-next", PlanDigest: next, PlanDigestOurs: true}, want: next, judge: true},
		"the step in flight of a namesake rollout wrote it: waiting":     {inflight: inflight, release: "a", live: Live{Exists: true, Step: "r-next/1", StepRolloutUID: "uid-old"}},
		"the step in flight has not written it yet: waiting":             {inflight: inflight, release: "a", live: ours(active)},
		"a Remove step in flight: leaving":                               {inflight: inflight, release: "d", live: ours(active)},
		"a pending step: what it holds":                                  {inflight: inflight, release: "c", live: ours(failedTo), want: failedTo, judge: true},
		"the step in flight has not written it yet, none there: waiting": {inflight: inflight, release: "a", live: Live{}},
		"the step in flight wrote it and it was deleted: its rollout's plan": {inflight: inflight, release: "a",
			live: Live{GoneStep: "r-next/1", GoneStepRolloutUID: "uid-next"}, want: next, judge: true},
		"a namesake rollout's step wrote the deleted one: waiting": {inflight: inflight, release: "a",
			live: Live{GoneStep: "r-next/1", GoneStepRolloutUID: "uid-old"}},
		"readiness judged the step's write, and it is gone: its rollout's plan": {inflight: judged, release: "a", live: Live{}, want: next, judge: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, judge := ExpectedPlan(h, tc.inflight, tc.release, tc.live)
			if got != tc.want || judge != tc.judge {
				t.Errorf("ExpectedPlan = %q, %v; want %q, %v", got, judge, tc.want, tc.judge)
			}
		})
	}
}

func TestHoldsDrift(t *testing.T) {
	t.Parallel()
	r := &v1alpha1.RuntimeRollout{Status: v1alpha1.RuntimeRolloutStatus{Steps: []v1alpha1.Step{
		{Index: 1, Release: "a", State: v1alpha1.StepInProgress, Reason: v1alpha1.ReasonSpecDrifted},
		{Index: 2, Release: "b", State: v1alpha1.StepPending},
	}}}
	setDrifted(r, map[string][]string{"c": {"Values"}}, t0)
	for release, want := range map[string]bool{"a": true, "b": false, "c": true, "d": false} {
		if got := HoldsDrift(r, release); got != want {
			t.Errorf("HoldsDrift(%s) = %v, want %v", release, got, want)
		}
	}
}
