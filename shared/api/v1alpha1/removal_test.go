package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRemovalChecks(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	rollout := func(phase RolloutPhase, steps ...Step) *RuntimeRollout {
		return &RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Status: RuntimeRolloutStatus{Phase: phase, Steps: steps}}
	}
	remove := func(release string, state StepState, at *time.Time) Step {
		s := Step{Release: release, Action: ActionRemove, State: state}
		if at != nil {
			mt := metav1.NewTime(*at)
			s.StartedAt = &mt
		}
		return s
	}
	earlier, later := started.Add(-time.Minute), started.Add(time.Minute)
	tests := map[string]struct {
		r          *RuntimeRollout
		lastWrite  time.Time
		inProgress bool
		started    bool
	}{
		"no rollout": {r: nil},
		"a Remove of the release in progress": {
			r: rollout(PhaseProgressing, remove("nfd", StepInProgress, &started)), lastWrite: earlier, inProgress: true, started: true,
		},
		"in progress in a stalled rollout": {
			r: rollout(PhaseStalled, remove("nfd", StepInProgress, &started)), lastWrite: earlier, inProgress: true, started: true,
		},
		"a Remove of another release": {r: rollout(PhaseProgressing, remove("gpu-operator", StepInProgress, &started))},
		"an Upgrade of the release":   {r: rollout(PhaseProgressing, Step{Release: "nfd", Action: ActionUpgrade, State: StepInProgress, StartedAt: &metav1.Time{Time: started}})},
		"a Remove awaiting approval":  {r: rollout(PhaseAwaitingApproval, remove("nfd", StepAwaitingApproval, nil))},
		"a Remove that succeeded": {
			r: rollout(PhaseSucceeded, remove("nfd", StepSucceeded, &started)), lastWrite: earlier, started: true,
		},
		"in progress in a rollout that failed": {
			r: rollout(PhaseFailed, remove("nfd", StepInProgress, &started)), lastWrite: earlier, started: true,
		},
		"a Remove started in the second the Application was last written": {
			r: rollout(PhaseProgressing, remove("nfd", StepInProgress, &started)), lastWrite: started.Add(300 * time.Millisecond), inProgress: true, started: true,
		},
		"the Application was written after the Remove started": {
			r: rollout(PhaseSucceeded, remove("nfd", StepSucceeded, &started)), lastWrite: later,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.r.RemoveInProgress("nfd"); got != tc.inProgress {
				t.Errorf("RemoveInProgress = %v, want %v", got, tc.inProgress)
			}
			if got := tc.r.RemoveStartedSince("nfd", tc.lastWrite); got != tc.started {
				t.Errorf("RemoveStartedSince = %v, want %v", got, tc.started)
			}
		})
	}
}
