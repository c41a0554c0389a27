package status

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

func inflight(stall string) *v1alpha1.RuntimeRollout {
	r := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-b-a"}, Status: v1alpha1.RuntimeRolloutStatus{
		Phase: v1alpha1.PhaseProgressing,
		Steps: []v1alpha1.Step{{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepInProgress}},
	}}
	if stall != "" {
		r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: stall, Message: "x"}}
	}
	return r
}

func TestConditions(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	base := func() Inputs {
		return Inputs{Runtime: &v1alpha1.ClusterRuntime{}, DesiredDigest: "sha256:b", ActiveDigest: "sha256:b",
			Engine: &bus.EngineStatus{Available: true, Reason: v1alpha1.ReasonEngineAvailable}}
	}
	tests := map[string]struct {
		mod                  func(in *Inputs)
		ready, stalled       string
		resolved, engineCond string
	}{
		"rolled out": {mod: func(*Inputs) {}, ready: v1alpha1.ReasonRolledOut, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"validation disabled": {mod: func(in *Inputs) { in.Runtime.Spec.Validation.Deployment = v1alpha1.ValidationDisabled },
			ready: v1alpha1.ReasonValidationDisabled, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"rolling out": {mod: func(in *Inputs) { in.InFlight = inflight("") },
			ready: v1alpha1.ReasonRollingOut, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"awaiting approval": {mod: func(in *Inputs) { in.InFlight = inflight(v1alpha1.ReasonAwaitingApproval) },
			ready: v1alpha1.ReasonRollingOut, stalled: v1alpha1.ReasonAwaitingApproval, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"transition blocked": {mod: func(in *Inputs) { in.InFlight = inflight(v1alpha1.ReasonTransitionBlocked) },
			ready: v1alpha1.ReasonRollingOut, stalled: v1alpha1.ReasonTransitionBlocked, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"inventory drift": {mod: func(in *Inputs) { in.InFlight = inflight(v1alpha1.ReasonInventoryDrift) },
			ready: v1alpha1.ReasonRollingOut, stalled: v1alpha1.ReasonInventoryDrift, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"spec drifted": {mod: func(in *Inputs) { in.InFlight = inflight(v1alpha1.ReasonSpecDrifted) },
			ready: v1alpha1.ReasonRollingOut, stalled: v1alpha1.ReasonSpecDrifted, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"rollout failed": {mod: func(in *Inputs) {
			in.DesiredDigest = "sha256:c"
			in.Last = &v1alpha1.RuntimeRollout{Status: v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseFailed, Outcome: v1alpha1.OutcomeFailed}}
		}, ready: v1alpha1.ReasonNotReady, stalled: v1alpha1.ReasonRolloutFailed, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"rollout expired with nothing active": {mod: func(in *Inputs) {
			in.ActiveDigest = ""
			in.Last = &v1alpha1.RuntimeRollout{Status: v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseExpired, Outcome: v1alpha1.OutcomeExpired}}
		}, ready: v1alpha1.ReasonNoActivePlan, stalled: v1alpha1.ReasonRolloutExpired, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"rollout revoked": {mod: func(in *Inputs) {
			in.DesiredDigest = "sha256:c"
			in.Last = &v1alpha1.RuntimeRollout{Status: v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseRevoked, Outcome: v1alpha1.OutcomeRevoked}}
		}, ready: v1alpha1.ReasonNotReady, stalled: v1alpha1.ReasonRolloutRevoked, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"resolving": {mod: func(in *Inputs) { in.ResolveReason = v1alpha1.ReasonResolving },
			ready: v1alpha1.ReasonRolledOut, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolving, engineCond: v1alpha1.ReasonEngineAvailable},
		"invalid override stalls": {mod: func(in *Inputs) {
			in.ResolveReason, in.ResolveMessage, in.DesiredDigest = v1alpha1.ReasonInvalidOverride, "spec.overrides[0].component: no component", ""
		}, ready: v1alpha1.ReasonNotReady, stalled: v1alpha1.ReasonInvalidOverride, resolved: v1alpha1.ReasonInvalidOverride, engineCond: v1alpha1.ReasonEngineAvailable},
		"no active plan": {mod: func(in *Inputs) {
			in.ActiveDigest, in.DesiredDigest, in.ResolveReason = "", "", v1alpha1.ReasonBundleUnavailable
		},
			ready: v1alpha1.ReasonNoActivePlan, stalled: v1alpha1.ReasonBundleUnavailable, resolved: v1alpha1.ReasonBundleUnavailable, engineCond: v1alpha1.ReasonEngineAvailable},
		"credentials unavailable": {mod: func(in *Inputs) {
			in.Credentials = &bus.CredentialsStatus{Reason: v1alpha1.ReasonRegistryCredentialsUnavailable, Message: "secret missing"}
		}, ready: v1alpha1.ReasonRolledOut, stalled: v1alpha1.ReasonRegistryCredentialsUnavailable, resolved: v1alpha1.ReasonRegistryCredentialsUnavailable, engineCond: v1alpha1.ReasonEngineAvailable},
		"credentials stale": {mod: func(in *Inputs) {
			in.Credentials = &bus.CredentialsStatus{Reason: v1alpha1.ReasonRegistryCredentialsStale}
		}, ready: v1alpha1.ReasonRolledOut, stalled: v1alpha1.ReasonRegistryCredentialsStale, resolved: v1alpha1.ReasonRegistryCredentialsStale, engineCond: v1alpha1.ReasonEngineAvailable},
		"paused": {mod: func(in *Inputs) { in.Runtime.Spec.Paused = true; in.InFlight = inflight("") },
			ready: v1alpha1.ReasonPaused, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"engine suspended": {mod: func(in *Inputs) { in.Runtime.Spec.SuspendEngine = true },
			ready: v1alpha1.ReasonEngineSuspended, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"engine suspension refused mid-step": {mod: func(in *Inputs) { in.Runtime.Spec.SuspendEngine = true; in.SuspensionRefused = "step 1 in flight" },
			ready: v1alpha1.ReasonEngineSuspensionRefused, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"engine missing": {mod: func(in *Inputs) { in.Engine = &bus.EngineStatus{Reason: v1alpha1.ReasonEngineMissing} },
			ready: v1alpha1.ReasonEngineMissing, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineMissing},
		"project missing": {mod: func(in *Inputs) { in.Engine = &bus.EngineStatus{Reason: v1alpha1.ReasonProjectMissing} },
			ready: v1alpha1.ReasonProjectMissing, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonProjectMissing},
		"engine not reported": {mod: func(in *Inputs) { in.Engine = nil },
			ready: v1alpha1.ReasonRolledOut, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineNotReported},
		"plan unreadable": {mod: func(in *Inputs) { in.PlanUnreadable = "gone" },
			ready: v1alpha1.ReasonPlanUnreadable, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
		"deleting": {mod: func(in *Inputs) { in.Runtime.DeletionTimestamp = &now },
			ready: v1alpha1.ReasonDeleting, stalled: v1alpha1.ReasonNotStalled, resolved: v1alpha1.ReasonResolved, engineCond: v1alpha1.ReasonEngineAvailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := base()
			tc.mod(&in)
			got := map[string]string{}
			for _, c := range Conditions(in) {
				got[c.Type] = c.Reason
			}
			want := map[string]string{
				v1alpha1.ConditionReady: tc.ready, v1alpha1.ConditionStalled: tc.stalled,
				v1alpha1.ConditionResolved: tc.resolved, v1alpha1.ConditionEngineAvailable: tc.engineCond,
			}
			for typ, w := range want {
				if got[typ] != w {
					t.Errorf("%s reason %q, want %q", typ, got[typ], w)
				}
			}
		})
	}
}

// TestReadySaysWhyNoStepStartsBeforeTheEngineReport proves a rollout held for readiness's
// first engine report says so on Ready, where a person looks.
func TestReadySaysWhyNoStepStartsBeforeTheEngineReport(t *testing.T) {
	t.Parallel()
	in := Inputs{Runtime: &v1alpha1.ClusterRuntime{}, DesiredDigest: "sha256:b", InFlight: inflight("")}
	var ready metav1.Condition
	for _, c := range Conditions(in) {
		if c.Type == v1alpha1.ConditionReady {
			ready = c
		}
	}
	if ready.Reason != v1alpha1.ReasonRollingOut || !strings.Contains(ready.Message, "no new step starts: "+rollout.EngineNotReportedMessage) {
		t.Errorf("Ready %s/%s %q; want RollingOut naming the missing engine report", ready.Status, ready.Reason, ready.Message)
	}
	in.Engine = &bus.EngineStatus{Available: true}
	for _, c := range Conditions(in) {
		if c.Type == v1alpha1.ConditionReady && strings.Contains(c.Message, rollout.EngineNotReportedMessage) {
			t.Errorf("Ready after the report still names it missing: %q", c.Message)
		}
	}
}

func TestApplyKeepsTransitionTimeWhenNothingChanged(t *testing.T) {
	t.Parallel()
	st := &v1alpha1.ClusterRuntimeStatus{}
	conds := Conditions(Inputs{Runtime: &v1alpha1.ClusterRuntime{}})
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !Apply(st, conds, t1) {
		t.Fatal("first Apply changed nothing")
	}
	if Apply(st, conds, t1.Add(time.Hour)) {
		t.Fatal("a second Apply with the same conditions reported a change")
	}
	if got := st.Conditions[0].LastTransitionTime.Time; !got.Equal(t1) {
		t.Errorf("transition time %s, want %s", got, t1)
	}
	_ = rollout.DefaultDeadline
}

func TestRecord(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	expires := t1.Add(time.Hour)
	failed := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-c-b"}, Status: v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseFailed, Outcome: v1alpha1.OutcomeFailed}}
	recorded := func() v1alpha1.ClusterRuntimeStatus {
		return v1alpha1.ClusterRuntimeStatus{Rollout: "r-b-a", EnginePolicy: "argocd.v1", Progress: "step 1/1 x (Install)"}
	}
	tests := map[string]struct {
		in   Inputs
		want func(st *v1alpha1.ClusterRuntimeStatus)
	}{
		"rolling out: the rollout in flight and its progress": {
			in: Inputs{ActiveDigest: "sha256:a", DesiredDigest: "sha256:b", InFlight: inflight(""), EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
			want: func(st *v1alpha1.ClusterRuntimeStatus) {
				st.ActivePlan, st.DesiredPlan, st.Rollout = "sha256:a", "sha256:b", "r-b-a"
				st.Progress, st.EnginePolicy = "step 1/1 gpu-operator (Upgrade)", v1alpha1.EnginePolicyArgoCDV2
			},
		},
		"a failed rollout is the one to look at; no progress": {
			in: Inputs{ActiveDigest: "sha256:b", DesiredDigest: "sha256:c", Last: failed},
			want: func(st *v1alpha1.ClusterRuntimeStatus) {
				st.ActivePlan, st.DesiredPlan, st.Rollout, st.Progress = "sha256:b", "sha256:c", "r-c-b", ""
			},
		},
		"nothing to look at keeps the rollout; no policy keeps the recorded one": {
			in: Inputs{ActiveDigest: "sha256:b", DesiredDigest: "sha256:b"},
			want: func(st *v1alpha1.ClusterRuntimeStatus) {
				st.ActivePlan, st.DesiredPlan, st.Progress = "sha256:b", "sha256:b", ""
			},
		},
		"the planner's build is recorded (an upgraded planner writes its own)": {
			in: Inputs{ActiveDigest: "sha256:b", DesiredDigest: "sha256:b", Operator: &v1alpha1.OperatorBuild{Version: "v0.2.0", Revision: "abc"}},
			want: func(st *v1alpha1.ClusterRuntimeStatus) {
				st.ActivePlan, st.DesiredPlan, st.Progress = "sha256:b", "sha256:b", ""
				st.Operator = &v1alpha1.OperatorBuild{Version: "v0.2.0", Revision: "abc"}
			},
		},
		"credentials are mirrored": {
			in: Inputs{Credentials: &bus.CredentialsStatus{Mode: "aws", OK: true, ExpiresAt: &expires}},
			want: func(st *v1alpha1.ClusterRuntimeStatus) {
				st.Progress = ""
				e := metav1.NewTime(expires)
				st.Credentials = &v1alpha1.CredentialsStatus{Mode: "aws", ExpiresAt: &e}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.in.Runtime = &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
			conds := Conditions(tc.in)
			st := recorded()
			Record(&st, tc.in, conds, 8, t1)
			want := recorded()
			want.ObservedGeneration = 8
			tc.want(&want)
			want.Conditions = st.Conditions
			if diff := cmp.Diff(want, st); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if len(st.Conditions) != 4 {
				t.Fatalf("%d conditions, want 4", len(st.Conditions))
			}
			for i, c := range conds {
				got := st.Conditions[i]
				if got.Type != c.Type || got.Reason != c.Reason || got.ObservedGeneration != 7 || !got.LastTransitionTime.Time.Equal(t1) {
					t.Errorf("condition %s: %+v, want %+v at %s", c.Type, got, c, t1)
				}
			}
		})
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	cond := func(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
	}
	f, tr := metav1.ConditionFalse, metav1.ConditionTrue
	before := []metav1.Condition{
		cond(v1alpha1.ConditionReady, f, v1alpha1.ReasonRollingOut, "step 1/2"),
		cond(v1alpha1.ConditionStalled, f, v1alpha1.ReasonNotStalled, ""),
	}
	tests := map[string]struct {
		conds []metav1.Condition
		want  []Transition
	}{
		"a new message alone is no transition": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionReady, f, v1alpha1.ReasonRollingOut, "step 2/2"), cond(v1alpha1.ConditionStalled, f, v1alpha1.ReasonNotStalled, "x")},
		},
		"rolled out: normal": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionReady, tr, v1alpha1.ReasonRolledOut, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionReady, tr, v1alpha1.ReasonRolledOut, "")}},
		},
		"stalled: warning": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionStalled, tr, v1alpha1.ReasonRolloutFailed, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionStalled, tr, v1alpha1.ReasonRolloutFailed, ""), Warning: true}},
		},
		"not ready: warning": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionReady, f, v1alpha1.ReasonNotReady, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionReady, f, v1alpha1.ReasonNotReady, ""), Warning: true}},
		},
		"a condition seen first; resolving is progress": {
			conds: []metav1.Condition{
				cond(v1alpha1.ConditionResolved, f, v1alpha1.ReasonResolving, ""),
				cond(v1alpha1.ConditionEngineAvailable, metav1.ConditionUnknown, v1alpha1.ReasonEngineNotReported, ""),
			},
			want: []Transition{
				{Condition: cond(v1alpha1.ConditionResolved, f, v1alpha1.ReasonResolving, "")},
				{Condition: cond(v1alpha1.ConditionEngineAvailable, metav1.ConditionUnknown, v1alpha1.ReasonEngineNotReported, "")},
			},
		},
		"engine missing: warning": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionEngineAvailable, f, v1alpha1.ReasonEngineMissing, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionEngineAvailable, f, v1alpha1.ReasonEngineMissing, ""), Warning: true}},
		},
		"a message parked: warning": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionMessagesParked, tr, v1alpha1.ReasonMessageParked, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionMessagesParked, tr, v1alpha1.ReasonMessageParked, ""), Warning: true}},
		},
		"none parked any more: normal": {
			conds: []metav1.Condition{cond(v1alpha1.ConditionMessagesParked, f, v1alpha1.ReasonNoMessagesParked, "")},
			want:  []Transition{{Condition: cond(v1alpha1.ConditionMessagesParked, f, v1alpha1.ReasonNoMessagesParked, "")}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, Transitions(before, tc.conds)); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}

// MessagesParked appears with the first parked message, names the oldest ones with their
// errors, turns False when the stream is empty again, and stays as it was while the planner
// has not read the stream.
func TestMessagesParked(t *testing.T) {
	t.Parallel()
	parkedOne := func(seq uint64) *bus.Parked {
		return &bus.Parked{Seq: seq, Subject: bus.ApplySubject("cluster", "gpu-operator"), Consumer: bus.ConsumerApplier, Failures: 10,
			Error: "apply application argocd/gpu-operator: admission webhook denied"}
	}
	had := func(st metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionMessagesParked, Status: st, Reason: reason, Message: "before"}}
	}
	tests := map[string]struct {
		before []metav1.Condition
		parked *bus.ParkedState
		want   *metav1.Condition // nil: no MessagesParked condition
	}{
		"never parked, not read yet": {},
		"never parked":               {parked: &bus.ParkedState{}},
		"one parked": {parked: &bus.ParkedState{Total: 1, Oldest: []*bus.Parked{parkedOne(3)}},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMessageParked, Message: "1 message(s) parked after their handling kept failing; " +
				"fix the cause, then send them back with kubectl aicr parked --retry; #3 aicr.v1.cmd.apply.cluster.gpu-operator (the applier gave up after 10 failures): " +
				"apply application argocd/gpu-operator: admission webhook denied"}},
		"more than are named": {parked: &bus.ParkedState{Total: 9, Oldest: []*bus.Parked{parkedOne(1), parkedOne(2), parkedOne(3), parkedOne(4), parkedOne(5), parkedOne(6)}},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMessageParked}},
		"retried": {before: had(metav1.ConditionTrue, v1alpha1.ReasonMessageParked), parked: &bus.ParkedState{},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoMessagesParked, Message: "no message is parked"}},
		"not read since a restart": {before: had(metav1.ConditionTrue, v1alpha1.ReasonMessageParked),
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMessageParked, Message: "before"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := &v1alpha1.ClusterRuntime{Status: v1alpha1.ClusterRuntimeStatus{Conditions: tc.before}}
			conds := Conditions(Inputs{Runtime: rt, Parked: tc.parked})
			var got *metav1.Condition
			for i := range conds {
				if conds[i].Type == v1alpha1.ConditionMessagesParked {
					got = &conds[i]
				}
			}
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("MessagesParked = %+v, want none", got)
			case tc.want == nil:
				return
			case got == nil:
				t.Fatalf("no MessagesParked condition, want %+v", tc.want)
			}
			if got.Status != tc.want.Status || got.Reason != tc.want.Reason || (tc.want.Message != "" && got.Message != tc.want.Message) {
				t.Errorf("MessagesParked = %s %s %q, want %s %s %q", got.Status, got.Reason, got.Message, tc.want.Status, tc.want.Reason, tc.want.Message)
			}
			if name == "more than are named" && (strings.Count(got.Message, "#") != parkedListed || !strings.HasSuffix(got.Message, "; and 4 more (kubectl aicr parked)")) {
				t.Errorf("message names %d and ends %q", strings.Count(got.Message, "#"), got.Message[len(got.Message)-40:])
			}
		})
	}
}
