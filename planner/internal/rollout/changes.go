package rollout

import (
	"fmt"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Event reasons the planner records on a RuntimeRollout (and, for the end, on its
// ClusterRuntime), beside the outcome reasons (v1alpha1.Outcome*) of a rollout's end.
// StepStarted and StepSucceeded are the reasons of a step's routine news (StepNews): the
// planner logs them and records no Event.
const (
	EventStepStarted      = "StepStarted"
	EventStepSucceeded    = "StepSucceeded"
	EventStepFailed       = "StepFailed"
	EventStepBlocked      = "StepBlocked"
	EventAwaitingApproval = v1alpha1.ReasonAwaitingApproval
	// EventDriftRepaired: the applier wrote an edited owned Application back to its plan.
	EventDriftRepaired = "DriftRepaired"
)

// StepChange is a step whose state changed between two statuses of one rollout.
type StepChange struct {
	// From is the state before ("" for a step the earlier status did not have).
	From v1alpha1.StepState
	// Step is the step as it is now.
	Step v1alpha1.Step
}

// StepChanges lists, in step order, the steps whose state differs between before and after
// (matched by index).
func StepChanges(before, after *v1alpha1.RuntimeRolloutStatus) []StepChange {
	was := make(map[int32]v1alpha1.StepState, len(before.Steps))
	for _, s := range before.Steps {
		was[s.Index] = s.State
	}
	var out []StepChange
	for _, s := range after.Steps {
		if from := was[s.Index]; from != s.State {
			out = append(out, StepChange{From: from, Step: s})
		}
	}
	return out
}

// EndedNow reports whether after is the first status of the rollout with an end.
func EndedNow(before, after *v1alpha1.RuntimeRolloutStatus) bool {
	return after.Phase.Terminal() && !before.Phase.Terminal()
}

// Event is one core/v1 Event to record.
type Event struct {
	// Warning makes it a Warning Event; Normal otherwise.
	Warning bool
	Reason  string
	Message string
}

// StepNews says what a step change of a rollout of steps steps is: started, succeeded,
// failed, blocked, awaiting approval. A step returning to Pending (an approval given before
// the step could start) or resuming from Blocked is no news. Routine news (a step started or
// succeeded) is for the log: the rollout's status already shows it, and an Event per step
// would double the planner's API requests per step. What a person may have to act on (a step
// failed, blocked, or awaiting approval) is also an Event (StepEvent).
func StepNews(ch StepChange, steps int) (ev Event, routine, ok bool) {
	ev, ok = stepNews(ch, steps)
	return ev, ok && (ev.Reason == EventStepStarted || ev.Reason == EventStepSucceeded), ok
}

// StepEvent returns the Event a step change gets on its rollout (StepNews that is not
// routine).
func StepEvent(ch StepChange, steps int) (Event, bool) {
	ev, routine, ok := StepNews(ch, steps)
	return ev, ok && !routine
}

func stepNews(ch StepChange, steps int) (Event, bool) {
	s := ch.Step
	name := fmt.Sprintf("step %d/%d %s (%s)", s.Index, steps, s.Release, s.Action)
	switch s.State {
	case v1alpha1.StepInProgress:
		if ch.From == v1alpha1.StepBlocked {
			return Event{}, false
		}
		return Event{Reason: EventStepStarted, Message: name + " started"}, true
	case v1alpha1.StepSucceeded:
		msg := name + " succeeded"
		if d, ok := Duration(&s); ok {
			msg += " in " + d.Round(time.Second).String()
		}
		return Event{Reason: EventStepSucceeded, Message: msg}, true
	case v1alpha1.StepFailed:
		return Event{Warning: true, Reason: EventStepFailed, Message: fmt.Sprintf("%s failed (%s): %s", name, s.Reason, s.Message)}, true
	case v1alpha1.StepBlocked:
		return Event{Warning: true, Reason: EventStepBlocked, Message: fmt.Sprintf("%s is blocked (%s): %s", name, s.Reason, s.Message)}, true
	case v1alpha1.StepAwaitingApproval:
		return Event{Reason: EventAwaitingApproval, Message: fmt.Sprintf("%s awaits a person's approval: %s", name, s.Message)}, true
	}
	return Event{}, false
}

// EndEvent returns the Event of a rollout's end, recorded on the rollout and its runtime: Normal
// for a success or a supersession, Warning otherwise, with the outcome as reason.
func EndEvent(r *v1alpha1.RuntimeRollout) Event {
	ok := r.Status.Phase == v1alpha1.PhaseSucceeded || r.Status.Phase == v1alpha1.PhaseSuperseded
	return Event{Warning: !ok, Reason: r.Status.Outcome, Message: fmt.Sprintf("rollout %s: %s", r.Name, r.Status.Message)}
}

// Duration is how long a finished step took, from its start to its end.
func Duration(s *v1alpha1.Step) (time.Duration, bool) {
	if s.StartedAt == nil || s.FinishedAt == nil || s.FinishedAt.Before(s.StartedAt) {
		return 0, false
	}
	return s.FinishedAt.Sub(s.StartedAt.Time), true
}
