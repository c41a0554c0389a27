package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// target returns the step a message names by step ID, when it belongs to this rollout, names
// the same release and is in flight. A message that names its rollout's UID (rolloutUID; empty
// from a component older than the field) must name this rollout object: a namesake rollout,
// deleted and created again, has the same step IDs, and its verdicts and results say nothing
// about this one's steps.
func target(r *v1alpha1.RuntimeRollout, stepID, rolloutUID, release string) *v1alpha1.Step {
	name, index, ok := v1alpha1.ParseStepID(stepID)
	if !ok || name != r.Name || r.Status.Phase.Terminal() || (rolloutUID != "" && rolloutUID != string(r.UID)) {
		return nil
	}
	s := step(r, index)
	if s == nil || s.Release != release || !inFlight(s) {
		return nil
	}
	return s
}

// ObserveVerdict records readiness's verdict on the step it names. A ready verdict whose
// StepID is the step's ID, judged against the step's plan, makes the step Succeeded, unless the
// step is SpecDrifted by an edit readiness saw at a later resourceVersion than it judged (the
// verdict then predates the edit; readiness reports a ready verdict again once the edit is
// undone). A verdict for another step, a finished step or a Remove step changes nothing. It
// reports whether the status changed.
func ObserveVerdict(r *v1alpha1.RuntimeRollout, v *bus.ReleaseVerdict, now time.Time) bool {
	s := target(r, v.StepID, v.RolloutUID, v.Release)
	if s == nil || s.Action == v1alpha1.ActionRemove {
		return false
	}
	observed := v.Time
	if observed.IsZero() {
		observed = now
	}
	verdict := &v1alpha1.Verdict{Ready: v.Ready, ObservedAt: mt(observed), ResourceVersion: v.Observed.ResourceVersion, Fences: v.Fences}
	if len(verdict.Fences) > 16 {
		verdict.Fences = verdict.Fences[:16]
	}
	if s.Verdict != nil && Newer(s.Verdict.ResourceVersion, verdict.ResourceVersion) {
		return false // an older observation than the one recorded, delivered late
	}
	before := s.DeepCopy()
	s.Verdict = verdict
	switch {
	case v.Ready && v.PlanDigest != r.Spec.ToDigest:
		// The Application names another plan than the step wrote (its annotation was edited):
		// its verdict says nothing about this step.
		verdict.Ready = false
		s.Message = fmt.Sprintf("readiness judged the Application against plan %s, not the step's plan %s (its %s annotation was changed); waiting for the step's write to be judged",
			cmp.Or(v.PlanDigest, "(none)"), r.Spec.ToDigest, v1alpha1.AnnotationPlanDigest)
	case v.Ready && s.Reason == v1alpha1.ReasonSpecDrifted && !Newer(verdict.ResourceVersion, s.DriftResourceVersion):
		// Judged before the edit that made the step SpecDrifted: not proof the edit is gone.
		verdict.Ready = false
	case v.Ready:
		// A succeeded step keeps which fences passed, not what each saw: every finished step
		// stays in the rollout, which is rewritten at each step, and the fences' messages
		// would be much of a long rollout's size, which is the API server's cost.
		verdict.Fences = slices.Clone(verdict.Fences)
		for i := range verdict.Fences {
			if verdict.Fences[i].State == v1alpha1.FencePassed {
				verdict.Fences[i].Message = ""
			}
		}
		s.State, s.Reason, s.FinishedAt, s.DriftResourceVersion = v1alpha1.StepSucceeded, "", mt(now), ""
		s.Message = "ready at the current revision"
		return true
	case s.State == v1alpha1.StepInProgress && s.Reason != v1alpha1.ReasonSpecDrifted:
		s.Message = "waiting for the release to be ready" + openFences(verdict)
	}
	return !sameStep(before, s)
}

// Newer reports whether resourceVersion a was stored after b. Resource versions are etcd
// revisions (as client-go's MutationCache compares them); one that does not parse, or an empty
// b, counts as newer, so an unknown order never holds a step back.
func Newer(a, b string) bool {
	if b == "" {
		return a != ""
	}
	av, errA := strconv.ParseUint(a, 10, 64)
	bv, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return av > bv
}

// AwaitsVerdict reports whether a step of the rollout in flight waits for this verdict: it
// names the step, the release, and a forward step in flight.
func AwaitsVerdict(r *v1alpha1.RuntimeRollout, v *bus.ReleaseVerdict) bool {
	s := target(r, v.StepID, v.RolloutUID, v.Release)
	return s != nil && s.Action != v1alpha1.ActionRemove
}

// VerdictNoteOnly reports whether ObserveVerdict would change nothing of the rollout but the
// recorded verdict and message of a step in flight: a not-ready verdict. It is a progress
// note (see NoteOnly); only a ready verdict decides something.
func VerdictNoteOnly(r *v1alpha1.RuntimeRollout, v *bus.ReleaseVerdict) bool {
	return !v.Ready && target(r, v.StepID, v.RolloutUID, v.Release) != nil
}

func sameStep(a, b *v1alpha1.Step) bool {
	if a.State != b.State || a.Reason != b.Reason || a.Message != b.Message || a.DriftResourceVersion != b.DriftResourceVersion {
		return false
	}
	if (a.Verdict == nil) != (b.Verdict == nil) {
		return false
	}
	if a.Verdict == nil {
		return true
	}
	return a.Verdict.Ready == b.Verdict.Ready && a.Verdict.ResourceVersion == b.Verdict.ResourceVersion && slices.Equal(a.Verdict.Fences, b.Verdict.Fences)
}

// ObserveResult records the applier's answer to a step's command:
//   - Foreign: the step Failed (ForeignObject, with the evidence): the next Advance fails the
//     rollout at once, as a foreign Application never becomes the operator's by waiting;
//   - Blocked: the step is Blocked (TransitionBlocked), the message says why;
//   - Failed: the step Failed (the next Advance fails the rollout);
//   - Outdated: the step Failed too (see bus.OutcomeOutdated; expected only for ended rollouts);
//   - Removed: a Remove step Succeeded;
//   - Written, Refreshed, SyncStarted: a Blocked step is in progress again; with deployment
//     validation disabled a forward step Succeeded (reason ValidationDisabled).
//
// It reports whether the status changed.
func ObserveResult(r *v1alpha1.RuntimeRollout, res *bus.ApplyResult, validationDisabled bool, now time.Time) bool {
	s := target(r, res.Step.ID, res.Step.RolloutUID, res.Release)
	if s == nil {
		return false
	}
	before := s.DeepCopy()
	switch res.Outcome {
	case bus.OutcomeForeign:
		// Someone else's Application will not become ours by waiting: the rollout fails now,
		// with the evidence, and the Application is never written or deleted.
		s.State, s.Reason, s.FinishedAt = v1alpha1.StepFailed, v1alpha1.ReasonForeignObject, mt(now)
		s.Message = v1alpha1.ReasonForeignObject + ": " + cmp.Or(res.Message, "an Application with this name exists and is not owned by this runtime; rename or delete it")
	case bus.OutcomeBlocked:
		s.State, s.Reason = v1alpha1.StepBlocked, v1alpha1.ReasonTransitionBlocked
		s.Message = cmp.Or(res.Message, "the Application carries the resources finalizer outside an approved Remove step") +
			"; remove the finalizer (the step is retried every " + BlockedRetryInterval.String() + " until its action timeout)"
	case bus.OutcomeFailed:
		s.State, s.FinishedAt = v1alpha1.StepFailed, mt(now)
		s.Reason = v1alpha1.ReasonRolloutFailed
		s.Message = "the applier refused the command"
		if res.Reason != "" {
			s.Message += " (" + res.Reason + ")"
		}
		if res.Message != "" {
			s.Message += ": " + res.Message
		}
	case bus.OutcomeOutdated:
		// Only a command of an ended rollout can be outdated; for a step in flight the
		// planners' clocks disagree (a new leader behind the old one): fail loudly.
		s.State, s.FinishedAt = v1alpha1.StepFailed, mt(now)
		s.Reason = v1alpha1.ReasonRolloutFailed
		s.Message = "the applier found the Application written by a later step and wrote nothing: " +
			cmp.Or(res.Message, "is the planner's clock behind an earlier leader's?")
	case bus.OutcomeRemoved:
		if s.Action != v1alpha1.ActionRemove {
			return false
		}
		s.State, s.Reason, s.Message, s.FinishedAt = v1alpha1.StepSucceeded, "", "the Application was removed; Argo CD deletes its resources", mt(now)
	case bus.OutcomeWritten, bus.OutcomeRefreshed, bus.OutcomeSyncStarted:
		if s.Action == v1alpha1.ActionRemove {
			return false
		}
		if s.State == v1alpha1.StepBlocked {
			s.State, s.Reason = v1alpha1.StepInProgress, ""
		}
		if validationDisabled {
			s.State, s.Reason, s.FinishedAt = v1alpha1.StepSucceeded, v1alpha1.ReasonValidationDisabled, mt(now)
			s.Message = fmt.Sprintf("written (%s); deployment validation is disabled", res.Outcome)
		} else if s.Reason != v1alpha1.ReasonSpecDrifted {
			s.Message = fmt.Sprintf("written (%s); waiting for the release to be ready", res.Outcome)
		}
	default:
		return false
	}
	return !sameStep(before, s)
}

// NoteOnly reports whether ObserveResult would change nothing of the rollout but the
// message of an InProgress step: the applier wrote the Application of a forward step whose
// verdict is still to come. Such a result is a progress note, not a decision: the planner may
// record it with its next write instead of writing the whole rollout for it (a step's
// verdict usually follows within milliseconds and replaces the message anyway).
func NoteOnly(r *v1alpha1.RuntimeRollout, res *bus.ApplyResult, validationDisabled bool) bool {
	switch res.Outcome {
	case bus.OutcomeWritten, bus.OutcomeRefreshed, bus.OutcomeSyncStarted:
	default:
		return false
	}
	s := target(r, res.Step.ID, res.Step.RolloutUID, res.Release)
	return s != nil && !validationDisabled && s.Action != v1alpha1.ActionRemove && s.State == v1alpha1.StepInProgress
}

// DriftAction is what the planner does about a drift report during a rollout.
type DriftAction int

// Drift actions.
const (
	// DriftNone: nothing to do (the release's own step will write it, or it is being removed).
	DriftNone DriftAction = iota
	// DriftRepair: force the fields back now, with a repair write from RepairDigest.
	DriftRepair
	// DriftRepublish: force the fields back in the release's own step (its command again, with
	// attempt "drift-<rv>").
	DriftRepublish
	// DriftRecorded: the rollout's status changed (InventoryDrift recorded or cleared,
	// SpecDrifted set or cleared).
	DriftRecorded
)

// DriftDecision is ObserveDrift's answer.
type DriftDecision struct {
	// Action to take.
	Action DriftAction
	// RepairDigest is the plan to write the release from (DriftRepair); empty for a release
	// with no step in the rollout: the plan it holds (Held), which the caller knows.
	RepairDigest string
	// Step is the release's step (DriftRepublish).
	Step *v1alpha1.Step
}

func contentDrift(kinds []string) bool {
	for _, k := range kinds {
		switch k {
		case bus.DriftSource, bus.DriftValues, bus.DriftDestination:
			return true
		}
	}
	return false
}

// ObserveDrift decides what a drift report means while this rollout is in flight:
//   - the drift is gone (no kinds): the InventoryDrift record and SpecDrifted are cleared (a
//     clear seen no later than the edit that made the step SpecDrifted is an old one: kept);
//   - source, values or destination of the release whose step is in flight: SpecDrifted, with
//     the resourceVersion it was seen at, until the action timeout fails the rollout or the
//     edit is undone and a ready verdict judged after it arrives;
//   - source, values or destination of any other release: the rollout stalls (InventoryDrift),
//     unless the release's step succeeded on a verdict judged after this report's version (the
//     report arrived late: readiness judged the plan's spec after it);
//   - other fields, or a deleted Application: forced back in the release's own step (at once
//     when it is in flight, by its write when it is pending) or, for a release whose step is
//     done or that has no step, by a repair write from the plan it is at.
func ObserveDrift(r *v1alpha1.RuntimeRollout, d *bus.DriftReport, now time.Time) DriftDecision {
	s := StepFor(r, d.Release)
	drifted := Drifted(r)
	if len(d.Kinds) == 0 {
		changed := false
		if _, ok := drifted[d.Release]; ok {
			delete(drifted, d.Release)
			setDrifted(r, drifted, now)
			changed = true
		}
		if s != nil && s.Reason == v1alpha1.ReasonSpecDrifted && s.State == v1alpha1.StepInProgress && Newer(d.ResourceVersion, s.DriftResourceVersion) {
			s.Reason, s.Message, s.DriftResourceVersion = "", "the edit was undone; waiting for the release to be ready", ""
			changed = true
		}
		if changed {
			return DriftDecision{Action: DriftRecorded}
		}
		return DriftDecision{}
	}
	if s != nil && s.Action == v1alpha1.ActionRemove {
		return DriftDecision{} // it is leaving: nothing to repair
	}
	if contentDrift(d.Kinds) && !slices.Contains(d.Kinds, bus.DriftDeleted) {
		if s != nil && inFlight(s) {
			// Recorded whatever verdict the step has: a step in flight has none that says ready
			// (that would have finished it), so none proves the edit gone.
			msg := SpecDriftMessage(d) + "; undo the edit, or the step fails at its action timeout"
			rv := s.DriftResourceVersion
			if Newer(d.ResourceVersion, rv) {
				rv = d.ResourceVersion
			}
			if s.Reason == v1alpha1.ReasonSpecDrifted && s.Message == msg && s.DriftResourceVersion == rv {
				return DriftDecision{}
			}
			s.Reason, s.Message, s.DriftResourceVersion = v1alpha1.ReasonSpecDrifted, msg, rv
			return DriftDecision{Action: DriftRecorded}
		}
		if s != nil && s.State == v1alpha1.StepSucceeded && s.Verdict != nil && !Newer(d.ResourceVersion, s.Verdict.ResourceVersion) {
			return DriftDecision{} // the step's ready verdict judged the plan's spec after this edit
		}
		kinds := append([]string(nil), d.Kinds...)
		slices.Sort(kinds)
		if drifted == nil {
			drifted = map[string][]string{}
		}
		if slices.Equal(drifted[d.Release], kinds) {
			return DriftDecision{}
		}
		drifted[d.Release] = kinds
		setDrifted(r, drifted, now)
		return DriftDecision{Action: DriftRecorded}
	}
	switch {
	case s == nil:
		return DriftDecision{Action: DriftRepair} // from the plan it holds (Held)
	case s.State == v1alpha1.StepSucceeded:
		return DriftDecision{Action: DriftRepair, RepairDigest: r.Spec.ToDigest}
	case inFlight(s):
		return DriftDecision{Action: DriftRepublish, Step: s}
	}
	return DriftDecision{} // pending: its own step writes every field
}

// SpecDriftMessage names an edit of a release's source, values or destination: its kinds and
// the fields readiness found differing from the plan.
func SpecDriftMessage(d *bus.DriftReport) string {
	msg := "the Application's source, values or destination was edited during its step (" + strings.Join(d.Kinds, ", ")
	if len(d.Fields) > 0 {
		msg += ": " + strings.Join(d.Fields, ", ")
	}
	return msg + ")"
}
