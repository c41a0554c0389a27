package rollout

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func TestStepChanges(t *testing.T) {
	t.Parallel()
	st := func(states ...v1alpha1.StepState) *v1alpha1.RuntimeRolloutStatus {
		out := &v1alpha1.RuntimeRolloutStatus{}
		for i, s := range states {
			out.Steps = append(out.Steps, v1alpha1.Step{Index: int32(i + 1), Release: fmt.Sprint("r", i+1), State: s})
		}
		return out
	}
	P, I, S, A := v1alpha1.StepPending, v1alpha1.StepInProgress, v1alpha1.StepSucceeded, v1alpha1.StepAwaitingApproval
	cases := map[string]struct {
		before, after *v1alpha1.RuntimeRolloutStatus
		want          string
	}{
		"nothing changed":                {st(S, I, P), st(S, I, P), "[]"},
		"new steps":                      {st(), st(P, P), "[:r1=Pending :r2=Pending]"},
		"a verdict finished and started": {st(S, I, P), st(S, S, I), "[InProgress:r2=Succeeded Pending:r3=InProgress]"},
		"approval awaited":               {st(S, P), st(S, A), "[Pending:r2=AwaitingApproval]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := []string{}
			for _, ch := range StepChanges(tc.before, tc.after) {
				got = append(got, fmt.Sprintf("%s:%s=%s", ch.From, ch.Step.Release, ch.Step.State))
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("changes = %s, want %s", s, tc.want)
			}
		})
	}
}

// TestStepNews: every step change worth telling has its news; a step's start and success are
// routine (logged), and only what a person may act on is an Event.
func TestStepNews(t *testing.T) {
	t.Parallel()
	started, finished := metav1.NewTime(t0), metav1.NewTime(t0.Add(83*time.Second+400*time.Millisecond))
	step := func(state v1alpha1.StepState, reason, msg string) v1alpha1.Step {
		return v1alpha1.Step{Index: 3, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: state, Reason: reason, Message: msg,
			StartedAt: &started, FinishedAt: &finished}
	}
	cases := map[string]struct {
		ch      StepChange
		want    *Event
		routine bool
	}{
		"started": {
			ch:      StepChange{From: v1alpha1.StepPending, Step: step(v1alpha1.StepInProgress, "", "")},
			want:    &Event{Reason: EventStepStarted, Message: "step 3/9 gpu-operator (Upgrade) started"},
			routine: true,
		},
		"succeeded, with its duration": {
			ch:      StepChange{From: v1alpha1.StepInProgress, Step: step(v1alpha1.StepSucceeded, "", "")},
			want:    &Event{Reason: EventStepSucceeded, Message: "step 3/9 gpu-operator (Upgrade) succeeded in 1m23s"},
			routine: true,
		},
		"failed": {
			ch: StepChange{From: v1alpha1.StepInProgress, Step: step(v1alpha1.StepFailed, v1alpha1.ReasonRolloutFailed, "not ready within the action timeout 15m0s")},
			want: &Event{Warning: true, Reason: EventStepFailed,
				Message: "step 3/9 gpu-operator (Upgrade) failed (RolloutFailed): not ready within the action timeout 15m0s"},
		},
		"blocked": {
			ch:   StepChange{From: v1alpha1.StepInProgress, Step: step(v1alpha1.StepBlocked, v1alpha1.ReasonForeignObject, "not ours")},
			want: &Event{Warning: true, Reason: EventStepBlocked, Message: "step 3/9 gpu-operator (Upgrade) is blocked (ForeignObject): not ours"},
		},
		"awaiting approval": {
			ch:   StepChange{From: v1alpha1.StepPending, Step: step(v1alpha1.StepAwaitingApproval, v1alpha1.ReasonAwaitingApproval, "no approval yet")},
			want: &Event{Reason: EventAwaitingApproval, Message: "step 3/9 gpu-operator (Upgrade) awaits a person's approval: no approval yet"},
		},
		"resumed from blocked: none": {ch: StepChange{From: v1alpha1.StepBlocked, Step: step(v1alpha1.StepInProgress, "", "")}},
		"back to pending: none":      {ch: StepChange{From: v1alpha1.StepAwaitingApproval, Step: step(v1alpha1.StepPending, "", "")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ev, routine, ok := StepNews(tc.ch, 9)
			recorded, isEvent := StepEvent(tc.ch, 9)
			if tc.want == nil {
				if ok || isEvent {
					t.Errorf("news %+v, Event %+v (%v), want none", ev, recorded, isEvent)
				}
				return
			}
			if !ok || ev != *tc.want || routine != tc.routine {
				t.Errorf("news %+v (%v, routine %v), want %+v (routine %v)", ev, ok, routine, *tc.want, tc.routine)
			}
			if isEvent == tc.routine || (isEvent && recorded != *tc.want) {
				t.Errorf("Event %+v (%v), want one only for news that is not routine", recorded, isEvent)
			}
		})
	}
}

func TestEndEvent(t *testing.T) {
	t.Parallel()
	cases := map[v1alpha1.RolloutPhase]bool{ // phase: warning
		v1alpha1.PhaseSucceeded: false, v1alpha1.PhaseSuperseded: false,
		v1alpha1.PhaseFailed: true, v1alpha1.PhaseExpired: true, v1alpha1.PhaseRevoked: true,
	}
	for phase, warning := range cases {
		r := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-1"},
			Status: v1alpha1.RuntimeRolloutStatus{Phase: phase, Outcome: "O" + string(phase), Message: "why"}}
		ev := EndEvent(r)
		if ev.Warning != warning || ev.Reason != "O"+string(phase) || ev.Message != "rollout r-1: why" {
			t.Errorf("%s: event %+v, want warning %v", phase, ev, warning)
		}
		before := &v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseProgressing}
		if !EndedNow(before, &r.Status) || EndedNow(&r.Status, &r.Status) {
			t.Errorf("%s: EndedNow wrong", phase)
		}
	}
}
