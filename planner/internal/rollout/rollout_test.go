package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// drive feeds a ready verdict for each started step, first in first out, and records the order
// in which steps started. It stops when nothing is in flight.
func drive(t *testing.T, r *v1alpha1.RuntimeRollout, e Env) [][]string {
	t.Helper()
	var waves [][]string
	res := Advance(r, e)
	queue := res.Started
	waves = append(waves, started(r, res.Started))
	for len(queue) > 0 {
		// finish everything in flight in this wave, then advance once: a DAG level.
		wave := queue
		var next []Start
		for _, s := range wave {
			if !ObserveVerdict(r, ready(r, s.Index), e.Now) {
				t.Fatalf("ready verdict for step %d changed nothing", s.Index)
			}
			next = append(next, Advance(r, e).Started...)
		}
		if len(next) > 0 {
			waves = append(waves, started(r, next))
		}
		queue = next
	}
	return waves
}

func TestAdvanceOrdersStepsByDependencies(t *testing.T) {
	tests := map[string]struct {
		parallelism int
		want        [][]string
	}{
		"parallelism 1 runs step n/N in dependency order": {
			parallelism: 1,
			want: [][]string{
				{"cert-manager(Install)"}, {"nfd(Install)"}, {"prometheus(Install)"}, {"gpu-operator(Install)"},
				{"network-operator(Install)"}, {"gpu-gate(Install)"},
			},
		},
		"parallelism 4 starts every step of a DAG level together": {
			parallelism: 4,
			want: [][]string{
				{"cert-manager(Install)"},
				{"nfd(Install)", "prometheus(Install)"},
				{"network-operator(Install)", "gpu-operator(Install)"},
				{"gpu-gate(Install)"},
			},
		},
		"parallelism 2 caps a wide level": {
			parallelism: 2,
			want: [][]string{
				{"cert-manager(Install)"},
				{"nfd(Install)", "prometheus(Install)"},
				{"network-operator(Install)", "gpu-operator(Install)"},
				{"gpu-gate(Install)"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRollout(t, nil, mkPlan(t, diamond(nil)...), plan.StepOptions{})
			e := env(t0)
			e.Parallelism = tc.parallelism
			got := drive(t, r, e)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("start order (-want +got):\n%s", diff)
			}
			Advance(r, e)
			if r.Status.Phase != v1alpha1.PhaseSucceeded || r.Status.Outcome != v1alpha1.OutcomeSucceeded {
				t.Errorf("phase %s outcome %s, want Succeeded", r.Status.Phase, r.Status.Outcome)
			}
		})
	}
}

func TestAdvanceNeverExceedsParallelism(t *testing.T) {
	// Ten independent releases, parallelism 3.
	var comps []comp
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		comps = append(comps, comp{name: n})
	}
	r := newRollout(t, nil, mkPlan(t, comps...), plan.StepOptions{})
	e := env(t0)
	e.Parallelism = 3
	res := Advance(r, e)
	if len(res.Started) != 3 {
		t.Fatalf("started %d steps, want 3", len(res.Started))
	}
	if again := Advance(r, e); len(again.Started) != 0 {
		t.Fatalf("a second Advance started %v, want nothing (idempotent)", started(r, again.Started))
	}
	ObserveVerdict(r, ready(r, res.Started[0].Index), t0)
	if next := Advance(r, e); len(next.Started) != 1 {
		t.Fatalf("after one ready verdict started %d, want 1", len(next.Started))
	}
}

func TestRemoveStepsRunInReverseDependencyOrderWithApproval(t *testing.T) {
	from := mkPlan(t, diamond(nil)...)
	// nfd, network-operator and gpu-operator and the gate leave; prometheus is upgraded.
	to := mkPlan(t, comp{name: "cert-manager"}, comp{name: "prometheus", ver: 1, deps: []string{"cert-manager"}})
	r := newRollout(t, from, to, plan.StepOptions{})
	var got []string
	for _, s := range r.Status.Steps {
		got = append(got, s.Release+"("+string(s.Action)+")")
	}
	want := []string{"prometheus(Upgrade)", "gpu-gate(Remove)", "network-operator(Remove)", "gpu-operator(Remove)", "nfd(Remove)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	e := env(t0)
	e.Parallelism = 8
	res := Advance(r, e)
	if diff := cmp.Diff([]string{"prometheus(Upgrade)"}, started(r, res.Started)); diff != "" {
		t.Fatalf("first start (-want +got):\n%s", diff)
	}
	ObserveVerdict(r, ready(r, 1), t0)
	Advance(r, e)
	if r.Status.Phase != v1alpha1.PhaseAwaitingApproval {
		t.Fatalf("phase %s, want AwaitingApproval (%s)", r.Status.Phase, states(r))
	}
	if reason, _, ok := StallReason(r); !ok || reason != v1alpha1.ReasonAwaitingApproval {
		t.Fatalf("stalled reason %q, want AwaitingApproval", reason)
	}
	approve(r, "alice@example.com", nil)
	res = Advance(r, e)
	// gpu-gate and network-operator depend on nothing removed after them; gpu-operator waits
	// for the gate, nfd for everyone that depended on it.
	if diff := cmp.Diff([]string{"gpu-gate(Remove)", "network-operator(Remove)"}, started(r, res.Started)); diff != "" {
		t.Fatalf("first removals (-want +got):\n%s", diff)
	}
	ObserveResult(r, result(r, 2, bus.OutcomeRemoved), false, t0)
	if diff := cmp.Diff([]string{"gpu-operator(Remove)"}, started(r, Advance(r, e).Started)); diff != "" {
		t.Fatalf("after the gate (-want +got):\n%s", diff)
	}
	ObserveResult(r, result(r, 3, bus.OutcomeRemoved), false, t0)
	ObserveResult(r, result(r, 4, bus.OutcomeRemoved), false, t0)
	if diff := cmp.Diff([]string{"nfd(Remove)"}, started(r, Advance(r, e).Started)); diff != "" {
		t.Fatalf("last removal (-want +got):\n%s", diff)
	}
	ObserveResult(r, result(r, 5, bus.OutcomeRemoved), false, t0)
	if Advance(r, e); r.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want Succeeded (%s)", r.Status.Phase, states(r))
	}
}

func TestApprovals(t *testing.T) {
	self := "system:serviceaccount:aicr-system:aicr-planner"
	later, earlier := t0.Add(time.Hour), t0.Add(-time.Minute)
	tests := map[string]struct {
		approve func(r *v1alpha1.RuntimeRollout)
		now     time.Time
		want    ApprovalState
		phase   v1alpha1.RolloutPhase
	}{
		"missing approval waits": {
			approve: func(*v1alpha1.RuntimeRollout) {}, now: t0, want: ApprovalMissing, phase: v1alpha1.PhaseAwaitingApproval,
		},
		"a person's approval starts the removal": {
			approve: func(r *v1alpha1.RuntimeRollout) { approve(r, "alice", &later) }, now: t0, want: ApprovalValid, phase: v1alpha1.PhaseProgressing,
		},
		"an expired approval waits": {
			approve: func(r *v1alpha1.RuntimeRollout) { approve(r, "alice", &earlier) }, now: t0, want: ApprovalExpired, phase: v1alpha1.PhaseAwaitingApproval,
		},
		"without an expiry the deadline ends the approval": {
			approve: func(r *v1alpha1.RuntimeRollout) { approve(r, "alice", nil) }, now: t0.Add(DefaultDeadline - time.Second), want: ApprovalValid, phase: v1alpha1.PhaseProgressing,
		},
		"the operator's own approval is ignored": {
			approve: func(r *v1alpha1.RuntimeRollout) { approve(r, self, nil) }, now: t0, want: ApprovalMissing, phase: v1alpha1.PhaseAwaitingApproval,
		},
		"a revoked approval ends the rollout": {
			approve: func(r *v1alpha1.RuntimeRollout) {
				approve(r, "alice", nil)
				r.Spec.Approval.Revoked = &v1alpha1.Revocation{RevokedBy: "bob", Reason: "wrong cluster"}
			},
			now: t0, want: ApprovalRevoked, phase: v1alpha1.PhaseRevoked,
		},
		"the operator's revocation of its own approval changes nothing": {
			approve: func(r *v1alpha1.RuntimeRollout) {
				approve(r, self, nil)
				r.Spec.Approval.Revoked = &v1alpha1.Revocation{RevokedBy: self, Reason: "x"}
			},
			now: t0, want: ApprovalMissing, phase: v1alpha1.PhaseAwaitingApproval,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			from := mkPlan(t, comp{name: "a"}, comp{name: "b"})
			to := mkPlan(t, comp{name: "a"})
			r := newRollout(t, from, to, plan.StepOptions{})
			tc.approve(r)
			if got := EvaluateApproval(r, []string{self}, tc.now).State; got != tc.want {
				t.Errorf("approval state %d, want %d", got, tc.want)
			}
			Advance(r, env(tc.now))
			if r.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s (%s)", r.Status.Phase, tc.phase, r.Status.Message)
			}
			if tc.phase == v1alpha1.PhaseRevoked && r.Status.Outcome != v1alpha1.OutcomeRevoked {
				t.Errorf("outcome %q, want %s", r.Status.Outcome, v1alpha1.OutcomeRevoked)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	tests := map[string]struct {
		setup   func(r *v1alpha1.RuntimeRollout)
		at      time.Duration
		phase   v1alpha1.RolloutPhase
		outcome string
	}{
		"a step within its action timeout keeps waiting": {
			at: DefaultActionTimeout - time.Second, phase: v1alpha1.PhaseProgressing,
		},
		"a step past its action timeout fails the rollout": {
			at: DefaultActionTimeout, phase: v1alpha1.PhaseFailed, outcome: v1alpha1.OutcomeFailed,
		},
		"a rollout past its deadline expires": {
			setup: func(r *v1alpha1.RuntimeRollout) { d := metav1.NewTime(t0.Add(time.Minute)); r.Spec.Deadline = &d },
			at:    time.Minute, phase: v1alpha1.PhaseExpired, outcome: v1alpha1.OutcomeExpired,
		},
		"a spec-drifted step fails at its action timeout": {
			setup: func(r *v1alpha1.RuntimeRollout) {
				ObserveDrift(r, &bus.DriftReport{Release: "a", Kinds: []string{bus.DriftValues}}, t0)
			},
			at: DefaultActionTimeout, phase: v1alpha1.PhaseFailed, outcome: v1alpha1.OutcomeFailed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
			res := Advance(r, env(t0))
			if len(res.Started) != 1 || !res.Wake.Equal(t0.Add(DefaultActionTimeout)) {
				t.Fatalf("started %v, wake %s; want one step and a wake at the action timeout", res.Started, res.Wake)
			}
			if tc.setup != nil {
				tc.setup(r)
			}
			Advance(r, env(t0.Add(tc.at)))
			if r.Status.Phase != tc.phase || r.Status.Outcome != tc.outcome {
				t.Errorf("phase %s outcome %q, want %s %q (%s)", r.Status.Phase, r.Status.Outcome, tc.phase, tc.outcome, r.Status.Message)
			}
			if tc.outcome != "" {
				if reason, _, _ := StallReason(r); reason != tc.outcome {
					t.Errorf("stalled reason %q, want %s", reason, tc.outcome)
				}
				if s := Step(r, 1); s.State != v1alpha1.StepFailed {
					t.Errorf("in-flight step state %s, want Failed (nothing is rolled back)", s.State)
				}
				if s := Step(r, 2); s.State != v1alpha1.StepPending {
					t.Errorf("later step state %s, want Pending", s.State)
				}
			}
		})
	}
}

func TestObserveResult(t *testing.T) {
	tests := map[string]struct {
		outcome    string
		validation bool
		state      v1alpha1.StepState
		reason     string
		phase      v1alpha1.RolloutPhase
	}{
		"Foreign fails the step and the rollout at once": {
			outcome: bus.OutcomeForeign, state: v1alpha1.StepFailed, reason: v1alpha1.ReasonForeignObject, phase: v1alpha1.PhaseFailed,
		},
		"Blocked by a finalizer stalls with a message": {
			outcome: bus.OutcomeBlocked, state: v1alpha1.StepBlocked, reason: v1alpha1.ReasonTransitionBlocked, phase: v1alpha1.PhaseStalled,
		},
		"Failed fails the step and the rollout": {
			outcome: bus.OutcomeFailed, state: v1alpha1.StepFailed, reason: v1alpha1.ReasonRolloutFailed, phase: v1alpha1.PhaseFailed,
		},
		"Outdated fails the step: only an ended rollout's command can be outdated": {
			outcome: bus.OutcomeOutdated, state: v1alpha1.StepFailed, reason: v1alpha1.ReasonRolloutFailed, phase: v1alpha1.PhaseFailed,
		},
		"Written waits for readiness": {
			outcome: bus.OutcomeWritten, state: v1alpha1.StepInProgress, phase: v1alpha1.PhaseProgressing,
		},
		"Written is done with validation disabled": {
			outcome: bus.OutcomeRefreshed, validation: true, state: v1alpha1.StepSucceeded, reason: v1alpha1.ReasonValidationDisabled, phase: v1alpha1.PhaseProgressing,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
			e := env(t0)
			e.ValidationDisabled = tc.validation
			Advance(r, e)
			if !ObserveResult(r, result(r, 1, tc.outcome), tc.validation, t0) {
				t.Fatalf("result changed nothing")
			}
			res := Advance(r, e)
			s := Step(r, 1)
			if s.State != tc.state || s.Reason != tc.reason || r.Status.Phase != tc.phase {
				t.Errorf("step %s/%s, phase %s; want %s/%s, %s (%s)", s.State, s.Reason, r.Status.Phase, tc.state, tc.reason, tc.phase, s.Message)
			}
			if tc.state == v1alpha1.StepBlocked && len(res.Started) != 0 {
				t.Errorf("a stalled rollout started %v", res.Started)
			}
			if tc.validation && len(res.Started) != 1 {
				t.Errorf("with validation disabled the next step did not start at once")
			}
		})
	}
}

func TestBlockedStepRetriesAndResumes(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	Advance(r, env(t0))
	ObserveResult(r, result(r, 1, bus.OutcomeBlocked), false, t0)
	res := Advance(r, env(t0))
	if want := t0.Add(BlockedRetryInterval); !res.Wake.Equal(want) {
		t.Errorf("wake %s, want the retry at %s", res.Wake, want)
	}
	out := Outstanding(r, t0.Add(BlockedRetryInterval+time.Second))
	if diff := cmp.Diff([]Start{{Index: 1, Attempt: "2"}}, out); diff != "" {
		t.Errorf("retry (-want +got):\n%s", diff)
	}
	ObserveResult(r, result(r, 1, bus.OutcomeWritten), false, t0.Add(BlockedRetryInterval))
	Advance(r, env(t0.Add(BlockedRetryInterval)))
	if s := Step(r, 1); s.State != v1alpha1.StepInProgress || r.Status.Phase != v1alpha1.PhaseProgressing {
		t.Errorf("step %s, phase %s; want InProgress, Progressing", s.State, r.Status.Phase)
	}
}

func TestVerdictForAnotherStepIsIgnored(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	Advance(r, env(t0))
	stale := ready(r, 1)
	stale.StepID = "r-other-none/1"
	if ObserveVerdict(r, stale, t0) {
		t.Fatalf("a verdict for another rollout's step changed the status")
	}
	notReady := ready(r, 1)
	notReady.Ready = false
	notReady.Fences = []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen}}
	ObserveVerdict(r, notReady, t0)
	if s := Step(r, 1); s.State != v1alpha1.StepInProgress || s.Verdict == nil || s.Verdict.Ready {
		t.Fatalf("a not-ready verdict: step %s verdict %+v", s.State, s.Verdict)
	}
}

// A rollout deleted and created again under its name has the same step IDs: a verdict or a
// result that names the first rollout object's UID says nothing about the second's steps, and
// one naming no UID (from a component older than the field) is taken by step ID as before.
func TestMessagesOfANamesakeRolloutAreIgnored(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	r.UID = "rollout-uid-b"
	Advance(r, env(t0))
	namesake := ready(r, 1)
	namesake.RolloutUID = "rollout-uid-a"
	if AwaitsVerdict(r, namesake) || VerdictNoteOnly(r, &bus.ReleaseVerdict{Release: namesake.Release, StepID: namesake.StepID, RolloutUID: "rollout-uid-a"}) {
		t.Errorf("the rollout waits for its namesake's verdict")
	}
	if ObserveVerdict(r, namesake, t0) {
		t.Fatalf("the namesake's ready verdict changed the status: step %+v", Step(r, 1))
	}
	failed := result(r, 1, bus.OutcomeFailed)
	failed.Step.RolloutUID = "rollout-uid-a"
	if ObserveResult(r, failed, false, t0) {
		t.Fatalf("the namesake's failed result changed the status: step %+v", Step(r, 1))
	}
	own := ready(r, 1)
	own.RolloutUID = "rollout-uid-b"
	if !ObserveVerdict(r, own, t0) || Step(r, 1).State != v1alpha1.StepSucceeded {
		t.Fatalf("the rollout's own ready verdict: step %+v, want Succeeded", Step(r, 1))
	}
}

func TestHoldsStopNewSteps(t *testing.T) {
	expiry := t0.Add(10 * time.Minute)
	tests := map[string]func(e *Env){
		"paused":                       func(e *Env) { e.Hold = &Hold{Reason: v1alpha1.ReasonPaused} },
		"engine missing":               func(e *Env) { e.Hold = &Hold{Reason: v1alpha1.ReasonEngineMissing} },
		"token expires before timeout": func(e *Env) { e.CredentialsExpireAt = expiry },
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
			e := env(t0)
			mod(&e)
			if res := Advance(r, e); len(res.Started) != 0 {
				t.Fatalf("started %v under a hold", started(r, res.Started))
			}
			if r.Status.Phase != v1alpha1.PhasePending {
				t.Errorf("phase %s, want Pending", r.Status.Phase)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	from := mkPlan(t, comp{name: "a"}, comp{name: "b"}, comp{name: "c"})
	to := mkPlan(t, comp{name: "a", ver: 1}, comp{name: "b", ver: 1, deps: []string{"a"}}, comp{name: "c"})
	newR := func() *v1alpha1.RuntimeRollout {
		r := newRollout(t, from, to, plan.StepOptions{})
		Advance(r, env(t0)) // a in flight, b pending, c has no step
		return r
	}
	tests := map[string]struct {
		report *bus.DriftReport
		action DriftAction
		phase  v1alpha1.RolloutPhase
		reason string
	}{
		"values edit of the in-flight release is SpecDrifted": {
			report: &bus.DriftReport{Release: "a", Kinds: []string{bus.DriftValues}},
			action: DriftRecorded, phase: v1alpha1.PhaseStalled, reason: v1alpha1.ReasonSpecDrifted,
		},
		"source edit of another release stalls with InventoryDrift": {
			report: &bus.DriftReport{Release: "c", Kinds: []string{bus.DriftSource}},
			action: DriftRecorded, phase: v1alpha1.PhaseStalled, reason: v1alpha1.ReasonInventoryDrift,
		},
		"other fields of a release without a step are forced back from the plan it holds": {
			report: &bus.DriftReport{Release: "c", Kinds: []string{bus.DriftAutoSyncDisabled}},
			action: DriftRepair, phase: v1alpha1.PhaseProgressing,
		},
		"other fields of the in-flight release are forced back in its step": {
			report: &bus.DriftReport{Release: "a", Kinds: []string{bus.DriftOther}},
			action: DriftRepublish, phase: v1alpha1.PhaseProgressing,
		},
		"other fields of a pending release wait for its own step": {
			report: &bus.DriftReport{Release: "b", Kinds: []string{bus.DriftOther}},
			action: DriftNone, phase: v1alpha1.PhaseProgressing,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newR()
			dec := ObserveDrift(r, tc.report, t0)
			if dec.Action != tc.action {
				t.Fatalf("action %d, want %d", dec.Action, tc.action)
			}
			if tc.action == DriftRepair && dec.RepairDigest != "" {
				t.Errorf("repair digest %s, want none: a release without a step is repaired from the plan it holds (Held)", dec.RepairDigest)
			}
			res := Advance(r, env(t0))
			if r.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s (%s)", r.Status.Phase, tc.phase, r.Status.Message)
			}
			if reason, _, _ := StallReason(r); reason != tc.reason {
				t.Errorf("stalled reason %q, want %q", reason, tc.reason)
			}
			if tc.reason == v1alpha1.ReasonInventoryDrift {
				ObserveVerdict(r, ready(r, 1), t0)
				if res = Advance(r, env(t0)); len(res.Started) != 0 {
					t.Errorf("inventory drift did not stop new steps: %v", started(r, res.Started))
				}
				ObserveDrift(r, &bus.DriftReport{Release: tc.report.Release}, t0)
				if res = Advance(r, env(t0)); len(res.Started) != 1 {
					t.Errorf("undoing the edit did not resume the rollout (%s)", r.Status.Message)
				}
			}
		})
	}
}

func TestSupersede(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	if !Supersede(r, "sha256:new", t0) || r.Status.Phase != v1alpha1.PhaseSuperseded || r.Status.Outcome != v1alpha1.OutcomeSuperseded {
		t.Fatalf("a rollout without a started step was not superseded: %s", r.Status.Phase)
	}
	r = newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	Advance(r, env(t0))
	if Supersede(r, "sha256:new", t0) {
		t.Fatalf("a rollout with a started step was superseded; it must be waited for")
	}
}

func TestNamesAndCommandIDs(t *testing.T) {
	t.Parallel()
	if got := Name("", "sha256:0123456789abcdef"); got != "r-0123456789-none" {
		t.Errorf("Name = %q", got)
	}
	// A rollout of the same name created again publishes its commands under new IDs; the same
	// rollout's republish keeps its ID.
	a := CommandID("r-abc-none/1", "1", "2b5a1f4c-97e1-4bd0-9a6e-0a1b2c3d4e5f")
	b := CommandID("r-abc-none/1", "1", "7c0d412a-a2aa-4b3b-8a20-1455aa00bb11")
	if a != "r-abc-none/1/1/2b5a1f4c" || a == b || a != CommandID("r-abc-none/1", "1", "2b5a1f4c-97e1-4bd0-9a6e-0a1b2c3d4e5f") {
		t.Errorf("CommandID = %q and %q for two incarnations of a rollout", a, b)
	}
}

func TestProgress(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, diamond(nil)...), plan.StepOptions{})
	Advance(r, env(t0))
	if got, want := Progress(r), "step 1/6 cert-manager (Install)"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
}

func TestEnginePolicyMoveAppliesEveryRelease(t *testing.T) {
	p := mkPlan(t, diamond(nil)...)
	r := newRollout(t, p, p, plan.StepOptions{ApplyAll: true})
	if len(r.Status.Steps) != 6 {
		t.Fatalf("%d steps, want 6", len(r.Status.Steps))
	}
	for _, s := range r.Status.Steps {
		if s.Action != v1alpha1.ActionApply {
			t.Errorf("%s: %s, want Apply", s.Release, s.Action)
		}
	}
}

// NoteOnly holds exactly when ObserveResult would change no more than the step's message:
// every outcome, from every in-flight state, with validation on and off, for Apply and
// Remove steps.
func TestNoteOnlyChangesOnlyTheMessage(t *testing.T) {
	outcomes := []string{bus.OutcomeWritten, bus.OutcomeRefreshed, bus.OutcomeSyncStarted, bus.OutcomeRemoved,
		bus.OutcomeForeign, bus.OutcomeBlocked, bus.OutcomeFailed, bus.OutcomeOutdated, "Unknown"}
	notes := 0
	for _, remove := range []bool{false, true} {
		for _, state := range []v1alpha1.StepState{v1alpha1.StepInProgress, v1alpha1.StepBlocked} {
			for _, validationDisabled := range []bool{false, true} {
				for _, outcome := range outcomes {
					var r *v1alpha1.RuntimeRollout
					if remove {
						r = newRollout(t, mkPlan(t, comp{name: "a"}, comp{name: "b"}), mkPlan(t, comp{name: "b"}), plan.StepOptions{})
					} else {
						r = newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
					}
					Advance(r, env(t0))
					s := StepFor(r, "a")
					s.State = state
					res := result(r, s.Index, outcome)
					note := NoteOnly(r, res, validationDisabled)
					before := r.DeepCopy()
					changed := ObserveResult(r, res, validationDisabled, t0)
					after := r.DeepCopy()
					after.Status.Steps[s.Index-1].Message = before.Status.Steps[s.Index-1].Message
					onlyMessage := equality.Semantic.DeepEqual(before.Status, after.Status)
					if note && !onlyMessage {
						t.Errorf("remove=%v %s validationDisabled=%v %s: NoteOnly, but ObserveResult changed more than the message", remove, state, validationDisabled, outcome)
					}
					if note {
						notes++
					}
					if !note && changed && onlyMessage && state == v1alpha1.StepInProgress && !validationDisabled && !remove {
						t.Errorf("%s: only the message changed, but NoteOnly is false", outcome)
					}
				}
			}
		}
	}
	if notes != 3 {
		t.Errorf("%d cases were notes, want 3 (Written, Refreshed, SyncStarted of an InProgress Apply step)", notes)
	}
}

// VerdictNoteOnly holds for a not-ready verdict of a step in flight, and then ObserveVerdict
// changes no more than the step's verdict and message; a ready verdict is never a note.
func TestVerdictNoteOnlyChangesOnlyVerdictAndMessage(t *testing.T) {
	notes := 0
	for _, state := range []v1alpha1.StepState{v1alpha1.StepInProgress, v1alpha1.StepBlocked, v1alpha1.StepSucceeded, v1alpha1.StepPending} {
		for _, ready := range []bool{false, true} {
			r := newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
			Advance(r, env(t0))
			s := Step(r, 1)
			s.State = state
			v := &bus.ReleaseVerdict{Runtime: "cluster", Release: s.Release, StepID: v1alpha1.StepID(r.Name, 1), PlanDigest: r.Spec.ToDigest, Ready: ready,
				Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Progressing"}}}
			note := VerdictNoteOnly(r, v)
			before := r.DeepCopy()
			changed := ObserveVerdict(r, v, t0)
			after := r.DeepCopy()
			after.Status.Steps[0].Message, after.Status.Steps[0].Verdict = before.Status.Steps[0].Message, before.Status.Steps[0].Verdict
			if note && !equality.Semantic.DeepEqual(before.Status, after.Status) {
				t.Errorf("%s ready=%v: a note, but ObserveVerdict changed more than verdict and message", state, ready)
			}
			if note {
				notes++
				if !changed {
					t.Errorf("%s: a note that records nothing", state)
				}
			}
		}
	}
	if notes != 2 {
		t.Errorf("%d notes, want 2 (not-ready verdicts of InProgress and Blocked steps)", notes)
	}
}

// A ready verdict finishes the step and records which fences passed without what each saw;
// the readiness message of the verdict itself is not changed.
func TestReadyVerdictKeepsFenceStatesOnly(t *testing.T) {
	r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
	Advance(r, env(t0))
	v := ready(r, 1)
	v.Fences = []v1alpha1.Fence{
		{Name: v1alpha1.FenceSyncedAtRevision, State: v1alpha1.FencePassed, Message: "Synced at 1.2.3"},
		{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed, Message: "Healthy"},
	}
	if !ObserveVerdict(r, v, t0) {
		t.Fatal("a ready verdict changed nothing")
	}
	s := Step(r, 1)
	want := []v1alpha1.Fence{{Name: v1alpha1.FenceSyncedAtRevision, State: v1alpha1.FencePassed}, {Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}}
	if s.State != v1alpha1.StepSucceeded || s.Verdict == nil || !s.Verdict.Ready {
		t.Fatalf("step %s verdict %+v, want Succeeded and ready", s.State, s.Verdict)
	}
	if diff := cmp.Diff(want, s.Verdict.Fences); diff != "" {
		t.Errorf("recorded fences (-want +got):\n%s", diff)
	}
	if v.Fences[0].Message != "Synced at 1.2.3" {
		t.Errorf("the message of the verdict itself was changed")
	}
}

// A hand edit of the release in flight never passes its step: a ready verdict judged before
// the edit was seen does not succeed it (verdicts and drift reports may arrive out of order;
// resourceVersions order them), one judged after it does, and an edit not undone fails the
// rollout at the action timeout naming the drift.
func TestSpecDriftedStep(t *testing.T) {
	drift := func(rv string, kinds ...string) *bus.DriftReport {
		return &bus.DriftReport{Release: "a", Kinds: kinds, Fields: []string{".spec.source.helm.valuesObject.logLevel"}, ResourceVersion: rv}
	}
	readyAt := func(r *v1alpha1.RuntimeRollout, rv string) *bus.ReleaseVerdict {
		v := ready(r, 1)
		v.Observed.ResourceVersion = rv
		return v
	}
	edited := func(t *testing.T) *v1alpha1.RuntimeRollout {
		t.Helper()
		r := newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
		Advance(r, env(t0))
		if dec := ObserveDrift(r, drift("10", bus.DriftValues), t0); dec.Action != DriftRecorded {
			t.Fatalf("the edit was not recorded: %+v", dec)
		}
		if s := Step(r, 1); s.Reason != v1alpha1.ReasonSpecDrifted || s.DriftResourceVersion != "10" {
			t.Fatalf("step %s/%s drift rv %q, want SpecDrifted at 10", s.State, s.Reason, s.DriftResourceVersion)
		}
		return r
	}
	t.Run("an edit reported at the version of the step's not-ready verdict is recorded", func(t *testing.T) {
		// Readiness judges and diffs the same observation: the verdict and the report carry
		// the same resourceVersion, in either order.
		r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
		Advance(r, env(t0))
		v := readyAt(r, "10")
		v.Ready = false
		ObserveVerdict(r, v, t0)
		if dec := ObserveDrift(r, drift("10", bus.DriftValues), t0); dec.Action != DriftRecorded {
			t.Fatalf("the edit was not recorded: %+v", dec)
		}
		if s := Step(r, 1); s.Reason != v1alpha1.ReasonSpecDrifted || s.DriftResourceVersion != "10" {
			t.Errorf("step %s/%s drift rv %q, want SpecDrifted at 10", s.State, s.Reason, s.DriftResourceVersion)
		}
	})
	t.Run("a ready verdict judged before the edit does not succeed the step", func(t *testing.T) {
		r := edited(t)
		ObserveVerdict(r, readyAt(r, "9"), t0)
		Advance(r, env(t0))
		if s := Step(r, 1); s.State != v1alpha1.StepInProgress || s.Reason != v1alpha1.ReasonSpecDrifted || s.Verdict.Ready {
			t.Errorf("step %s/%s verdict ready=%v, want InProgress SpecDrifted, not ready", s.State, s.Reason, s.Verdict.Ready)
		}
		if reason, msg, _ := StallReason(r); reason != v1alpha1.ReasonSpecDrifted || !strings.Contains(msg, "valuesObject.logLevel") {
			t.Errorf("stalled %s: %s; want SpecDrifted naming the field", reason, msg)
		}
	})
	t.Run("a ready verdict judged after the edit succeeds it: the edit was undone", func(t *testing.T) {
		r := edited(t)
		ObserveVerdict(r, readyAt(r, "12"), t0)
		res := Advance(r, env(t0))
		if s := Step(r, 1); s.State != v1alpha1.StepSucceeded || s.DriftResourceVersion != "" || len(res.Started) != 1 {
			t.Errorf("step %s drift rv %q, started %v; want Succeeded and the next step started", s.State, s.DriftResourceVersion, res.Started)
		}
	})
	t.Run("a clear seen after the edit clears SpecDrifted; an older clear does not", func(t *testing.T) {
		r := edited(t)
		if dec := ObserveDrift(r, drift("8"), t0); dec.Action != DriftNone {
			t.Errorf("an older clear was recorded: %+v", dec)
		}
		if s := Step(r, 1); s.Reason != v1alpha1.ReasonSpecDrifted {
			t.Fatalf("an older clear cleared SpecDrifted")
		}
		if dec := ObserveDrift(r, drift("11"), t0); dec.Action != DriftRecorded {
			t.Errorf("the clear was not recorded: %+v", dec)
		}
		if s := Step(r, 1); s.Reason != "" || s.DriftResourceVersion != "" {
			t.Errorf("step %s/%s drift rv %q after the clear", s.State, s.Reason, s.DriftResourceVersion)
		}
		ObserveVerdict(r, readyAt(r, "12"), t0)
		if s := Step(r, 1); s.State != v1alpha1.StepSucceeded {
			t.Errorf("step %s after a ready verdict, want Succeeded", s.State)
		}
	})
	t.Run("an edit not undone fails the rollout at the action timeout, naming the drift", func(t *testing.T) {
		r := edited(t)
		ObserveVerdict(r, readyAt(r, "9"), t0)
		Advance(r, env(t0.Add(DefaultActionTimeout)))
		if r.Status.Phase != v1alpha1.PhaseFailed || r.Status.Outcome != v1alpha1.OutcomeFailed {
			t.Fatalf("phase %s outcome %s, want Failed", r.Status.Phase, r.Status.Outcome)
		}
		reason, msg, _ := StallReason(r)
		if reason != v1alpha1.ReasonRolloutFailed || !strings.Contains(msg, "SpecDrifted") || !strings.Contains(msg, "Values: .spec.source.helm.valuesObject.logLevel") || strings.Contains(msg, "undo the edit, or") {
			t.Errorf("stalled %s: %q; want RolloutFailed naming SpecDrifted and the edited field", reason, msg)
		}
	})
	t.Run("a ready verdict on another plan than the step's does not succeed it", func(t *testing.T) {
		r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
		Advance(r, env(t0))
		v := ready(r, 1)
		v.PlanDigest = "sha256:someotherplan"
		ObserveVerdict(r, v, t0)
		if s := Step(r, 1); s.State != v1alpha1.StepInProgress || !strings.Contains(s.Message, "not the step's plan") {
			t.Errorf("step %s (%s), want InProgress saying the verdict judged another plan", s.State, s.Message)
		}
	})
	t.Run("a verdict older than the one recorded is ignored", func(t *testing.T) {
		r := newRollout(t, nil, mkPlan(t, comp{name: "a"}), plan.StepOptions{})
		Advance(r, env(t0))
		notReady := readyAt(r, "20")
		notReady.Ready = false
		ObserveVerdict(r, notReady, t0)
		if ObserveVerdict(r, readyAt(r, "19"), t0) {
			t.Errorf("an older verdict changed the step")
		}
		if s := Step(r, 1); s.State != v1alpha1.StepInProgress {
			t.Errorf("step %s, want InProgress", s.State)
		}
	})
	t.Run("an edit reported late, after the step succeeded on a later verdict, does not stall the rollout", func(t *testing.T) {
		r := newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
		Advance(r, env(t0))
		ObserveVerdict(r, readyAt(r, "12"), t0)
		if dec := ObserveDrift(r, drift("10", bus.DriftValues), t0); dec.Action != DriftNone {
			t.Errorf("a late report was recorded: %+v", dec)
		}
		if d := Drifted(r); len(d) != 0 {
			t.Errorf("InventoryDrift recorded from a late report: %v", d)
		}
	})
}

// A foreign Application fails the rollout that reaches it at once, with the evidence the
// applier found in the condition; the steps after it never start.
func TestForeignObjectFailsTheRolloutWithTheEvidence(t *testing.T) {
	for _, remove := range []bool{false, true} {
		var r *v1alpha1.RuntimeRollout
		if remove {
			r = newRollout(t, mkPlan(t, comp{name: "a"}), nil, plan.StepOptions{})
			approve(r, "alice", nil)
		} else {
			r = newRollout(t, nil, mkPlan(t, comp{name: "a"}, comp{name: "b", deps: []string{"a"}}), plan.StepOptions{})
		}
		Advance(r, env(t0))
		res := result(r, 1, bus.OutcomeForeign)
		res.Message = `Application argocd/a is not owned by this runtime and is left alone: label app.kubernetes.io/managed-by is missing (want "aicr-operator")`
		if !ObserveResult(r, res, false, t0) {
			t.Fatalf("remove=%v: the result changed nothing", remove)
		}
		out := Advance(r, env(t0))
		if out.Ended != v1alpha1.OutcomeFailed || r.Status.Phase != v1alpha1.PhaseFailed || len(out.Started) != 0 {
			t.Fatalf("remove=%v: ended %q phase %s started %v; want RolloutFailed at once", remove, out.Ended, r.Status.Phase, out.Started)
		}
		reason, msg, _ := StallReason(r)
		if reason != v1alpha1.ReasonRolloutFailed || !strings.Contains(msg, "ForeignObject: Application argocd/a is not owned by this runtime") ||
			!strings.Contains(msg, "label app.kubernetes.io/managed-by is missing") {
			t.Errorf("remove=%v: stalled %s: %q; want RolloutFailed with ForeignObject and the evidence", remove, reason, msg)
		}
		if s := Step(r, 1); s.Reason != v1alpha1.ReasonForeignObject || s.FinishedAt == nil {
			t.Errorf("remove=%v: step %s/%s finished %v", remove, s.State, s.Reason, s.FinishedAt)
		}
	}
}
