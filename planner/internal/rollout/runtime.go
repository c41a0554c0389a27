package rollout

import (
	"cmp"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// This file holds the decisions a reconcile of a runtime makes about its rollouts, in the order
// the controller asks them: which rollout is in flight, where the stack is, where it should go
// next, whether the rollout in flight is superseded or waited for, whether a rollout of the move
// exists already, whether the Applications are written with automated sync off, and whether a
// runtime being deleted is done. Each is a function of plain inputs.

// WantsFinalizer reports whether a runtime that is not being deleted carries the planner's
// cleanup finalizer: only with deletionPolicy Delete, whose releases are removed before the
// runtime goes.
func WantsFinalizer(rt *v1alpha1.ClusterRuntime) bool {
	return rt.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete
}

// SortByCreation orders rollouts by creation time, then by name (creation times have
// one-second precision): the order in which a reconcile looks at them.
func SortByCreation(rs []v1alpha1.RuntimeRollout) {
	sort.Slice(rs, func(i, j int) bool {
		return rs[i].CreationTimestamp.Before(&rs[j].CreationTimestamp) ||
			(rs[i].CreationTimestamp.Equal(&rs[j].CreationTimestamp) && rs[i].Name < rs[j].Name)
	})
}

// InFlight returns the first rollout of the runtime with runtimeUID that has not ended (one
// not yet initialized counts), and every later one in extra. Two rollouts in flight cannot
// come from this planner; the caller supersedes the extra ones (Supersede leaves one that has
// started a step to its timeout). Rollouts of an earlier runtime of the same name are ignored.
func InFlight(rs []v1alpha1.RuntimeRollout, runtimeUID string) (first *v1alpha1.RuntimeRollout, extra []*v1alpha1.RuntimeRollout) {
	for i := range rs {
		r := &rs[i]
		if r.Status.Phase.Terminal() || r.Spec.RuntimeUID != runtimeUID {
			continue
		}
		if first == nil {
			first = r
			continue
		}
		extra = append(extra, r)
	}
	return first, extra
}

// Position is where a runtime's stack is: the plan it was last rolled out to and the engine
// policy its Applications were written under (status.activePlan and status.enginePolicy).
type Position struct {
	// Plan is the active plan's digest ("" before the first rollout succeeded).
	Plan string
	// EnginePolicy is the recorded engine policy ("" when written by an older operator).
	EnginePolicy string
}

// After returns the position once r ended: a success moves the stack to r's to-plan, written
// under the current engine policy; any other outcome leaves it where it was.
func (p Position) After(r *v1alpha1.RuntimeRollout) Position {
	if r.Status.Phase != v1alpha1.PhaseSucceeded {
		return p
	}
	return Position{Plan: r.Spec.ToDigest, EnginePolicy: v1alpha1.EnginePolicyArgoCDV2}
}

// Adopt returns the position after the latest finished rollout of the runtime when it
// succeeded from p's plan: the planner stopped between that success and the runtime's status
// write. Otherwise it returns p. Superseded rollouts never moved anything and are skipped.
//
// Finish times have one-second precision, and fast rollouts finish within the same second: on
// a tie, the rollout that moved away from the active plan is the later one (its predecessor's
// success made that plan active), so it wins; otherwise the first in rs wins.
func Adopt(rs []v1alpha1.RuntimeRollout, runtimeUID string, p Position) Position {
	var latest *v1alpha1.RuntimeRollout
	for i := range rs {
		r := &rs[i]
		if r.Status.FinishedAt == nil || r.Spec.RuntimeUID != runtimeUID || r.Status.Phase == v1alpha1.PhaseSuperseded {
			continue
		}
		if latest == nil || latest.Status.FinishedAt.Before(r.Status.FinishedAt) ||
			(latest.Status.FinishedAt.Equal(r.Status.FinishedAt) && latest.Spec.FromDigest != p.Plan && r.Spec.FromDigest == p.Plan) {
			latest = r
		}
	}
	if latest != nil && latest.Spec.FromDigest == p.Plan {
		return p.After(latest)
	}
	return p
}

// TargetInputs are what the choice of the next move reads.
type TargetInputs struct {
	// Deleting is true once the runtime has a deletion timestamp.
	Deleting bool
	// DeletionPolicy is the runtime's spec.deletionPolicy.
	DeletionPolicy v1alpha1.DeletionPolicy
	// At is where the stack is.
	At Position
	// Desired is the digest of the plan the spec resolves to ("" when it does not, and always
	// while deleting).
	Desired string
	// InFlight is the rollout in flight, if any.
	InFlight *v1alpha1.RuntimeRollout
}

// Target is where the stack should go next.
type Target struct {
	// Move is true when a rollout to To is wanted.
	Move bool
	// To is the digest of the target plan ("" for the runtime's removal).
	To string
	// Reason is the rollout reason (RolloutReasonPlanChanged, RolloutReasonEnginePolicyChanged,
	// RolloutReasonRuntimeDeleted).
	Reason string
	// ReleaseFinalizer is true when a runtime being deleted has nothing more to do: its policy
	// is Retain, or nothing was rolled out and no rollout has started a step.
	ReleaseFinalizer bool
}

// ChooseTarget says where the stack goes next. A runtime being deleted with deletionPolicy
// Delete and an active plan moves to no plan at all (every release removed); one being deleted
// otherwise releases its finalizer at once, unless a rollout that has started steps must be
// waited for first. A runtime that is not being deleted moves to its desired plan when that
// differs from the active one, or when the Applications were written under another engine
// policy (a rollout with reason EnginePolicyChanged that writes every release again; it
// carries a plan change too). Otherwise nothing moves.
func ChooseTarget(in TargetInputs) Target {
	policyMove := in.At.Plan != "" && in.At.EnginePolicy != v1alpha1.EnginePolicyArgoCDV2
	del := in.DeletionPolicy == v1alpha1.DeletionPolicyDelete
	switch {
	case in.Deleting && del && in.At.Plan != "":
		return Target{Move: true, To: "", Reason: v1alpha1.RolloutReasonRuntimeDeleted}
	case in.Deleting:
		if in.InFlight == nil || !Started(in.InFlight) || !del {
			return Target{ReleaseFinalizer: true}
		}
		return Target{}
	case in.Desired != "" && (in.Desired != in.At.Plan || policyMove):
		reason := v1alpha1.RolloutReasonPlanChanged
		if policyMove {
			reason = v1alpha1.RolloutReasonEnginePolicyChanged
		}
		return Target{Move: true, To: in.Desired, Reason: reason}
	}
	return Target{}
}

// Replacement is what happens to the rollout in flight when the target moved.
type Replacement int

// Replacements.
const (
	// KeepInFlight: the rollout in flight goes where the target is (or nothing moves).
	KeepInFlight Replacement = iota
	// SupersedeInFlight: it has not started a step; end it Superseded and roll out the target.
	SupersedeInFlight
	// WaitForInFlight: it has started steps; the target waits until it ends.
	WaitForInFlight
)

// Replace says whether the rollout in flight (may be nil) still serves the target: it does
// when it goes to the same plan; a runtime's removal replaces even a rollout to no plan with
// another reason. Otherwise a rollout that has started no step is superseded, and one that has
// is waited for: steps never change under a running step. waiting says so, for the runtime's
// Ready condition; newer names the target in the superseded rollout's message.
func Replace(inflight *v1alpha1.RuntimeRollout, t Target) (action Replacement, newer, waiting string) {
	if inflight == nil || !t.Move ||
		(inflight.Spec.ToDigest == t.To && (inflight.Spec.Reason == t.Reason || t.Reason != v1alpha1.RolloutReasonRuntimeDeleted)) {
		return KeepInFlight, "", ""
	}
	if Started(inflight) {
		what := "plan " + t.To
		if t.Reason == v1alpha1.RolloutReasonRuntimeDeleted {
			what = "the runtime's removal"
		}
		return WaitForInFlight, "", fmt.Sprintf("%s waits for rollout %s, which has started steps, to finish", what, inflight.Name)
	}
	return SupersedeInFlight, cmp.Or(t.To, "(removal)"), ""
}

// Reuse is what becomes of a rollout that already bears the name of the move (Name(from, to)).
type Reuse int

// Reuses.
const (
	// CreateNew: there is none; create the rollout.
	CreateNew Reuse = iota
	// ReplaceEarlierRuntime: it belongs to an earlier runtime of the same name, history of a
	// stack that was deleted; delete it (already gone or changed is fine) and create the
	// rollout.
	ReplaceEarlierRuntime
	// ReplaceEnded: the same move ended Succeeded or Superseded before; delete it to make room
	// for a fresh rollout and create that.
	ReplaceEnded
	// KeepFailed: the same move ended without success (failed, expired, revoked); it stays and
	// keeps the runtime stalled until the spec changes or a person deletes it.
	KeepFailed
	// Resume: it has not ended; it is the rollout in flight.
	Resume
)

// ReuseExisting says what to do with existing (nil: no rollout of that name), the rollout of
// the move the target asks for, of the runtime with runtimeUID. Deterministic names mean a
// restart never creates a duplicate, and a failed move is not retried behind a person's back.
func ReuseExisting(existing *v1alpha1.RuntimeRollout, runtimeUID string) Reuse {
	switch {
	case existing == nil:
		return CreateNew
	case existing.Spec.RuntimeUID != runtimeUID:
		return ReplaceEarlierRuntime
	case existing.Status.Phase == v1alpha1.PhaseSuperseded || existing.Status.Phase == v1alpha1.PhaseSucceeded:
		return ReplaceEnded
	case existing.Status.Phase.Terminal():
		return KeepFailed
	}
	return Resume
}

// New returns the rollout to create for a move of the runtime from one plan to another, named
// Name(from, to), with its deadline (spec.rollout.deadline, DefaultDeadline when unset) from
// now, truncated to the second the API server keeps. Its steps are written by Initialize.
func New(rt *v1alpha1.ClusterRuntime, from, to, reason string, now time.Time) *v1alpha1.RuntimeRollout {
	deadline := metav1.NewTime(now.Add(durationOr(rt.Spec.Rollout.Deadline, DefaultDeadline)).UTC().Truncate(time.Second))
	return &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{
			Name:   Name(from, to),
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRuntime: rt.Name},
		},
		Spec: v1alpha1.RuntimeRolloutSpec{
			Runtime: rt.Name, RuntimeUID: string(rt.UID), FromDigest: from, ToDigest: to, Reason: reason, Deadline: &deadline,
		},
	}
}

// KeepsStalled reports whether a rollout that ended without success still keeps the runtime
// stalled with its outcome: it does unless the stack is at its to-plan anyway (a later move
// got there). A failed engine-policy move keeps it stalled even then: the Applications were
// not all written under the new policy.
func KeepsStalled(r *v1alpha1.RuntimeRollout, at Position) bool {
	return r.Spec.ToDigest != at.Plan || r.Spec.Reason == v1alpha1.RolloutReasonEnginePolicyChanged
}

// Removed reports whether a runtime being deleted with deletionPolicy Delete is done: no
// rollout in flight, no ended rollout holding it, and no active plan (every release removed).
// Its finalizer is released then.
func Removed(inflight, last *v1alpha1.RuntimeRollout, at Position) bool {
	return inflight == nil && last == nil && at.Plan == ""
}

// ValidationDisabled reports whether the runtime judges forward steps by their writes only
// (validation.deployment Disabled).
func ValidationDisabled(rt *v1alpha1.ClusterRuntime) bool {
	return rt.Spec.Validation.Deployment == v1alpha1.ValidationDisabled
}

// EnvFor is the scheduler's environment for a runtime at now: its rollout settings, and the
// hold that stops new steps, first of suspendEngine (a step cannot become ready with automated
// sync off), paused, Argo CD not available, registry credentials not usable. engine and creds
// are the last reports (nil: none yet, which holds nothing); identities are the operator's own.
func EnvFor(rt *v1alpha1.ClusterRuntime, engine *bus.EngineStatus, creds *bus.CredentialsStatus, identities []string, now time.Time) Env {
	e := Env{
		Now:                now,
		Parallelism:        int(rt.Spec.Rollout.Parallelism),
		ActionTimeout:      durationOr(rt.Spec.Rollout.ActionTimeout, DefaultActionTimeout),
		ValidationDisabled: ValidationDisabled(rt),
		Identities:         identities,
	}
	switch {
	case rt.Spec.SuspendEngine:
		e.Hold = &Hold{Reason: v1alpha1.ReasonEngineSuspended, Message: "spec.suspendEngine is true: no step starts while Argo CD's automated sync is off"}
	case rt.Spec.Paused:
		e.Hold = &Hold{Reason: v1alpha1.ReasonPaused, Message: "spec.paused is true"}
	case engine == nil:
		// Until readiness reports, nobody knows whether Argo CD's CRDs exist: a step started
		// now could write an Application the API server has no kind for.
		e.Hold = &Hold{Reason: v1alpha1.ReasonEngineNotReported, Message: EngineNotReportedMessage}
	case !engine.Available:
		e.Hold = &Hold{Reason: cmp.Or(engine.Reason, v1alpha1.ReasonEngineMissing), Message: "Argo CD is not available: " + engine.Message}
	case creds != nil && !creds.OK:
		e.Hold = &Hold{Reason: cmp.Or(creds.Reason, v1alpha1.ReasonRegistryCredentialsUnavailable), Message: "registry credentials: " + creds.Message}
	}
	if creds != nil && creds.ExpiresAt != nil {
		e.CredentialsExpireAt = *creds.ExpiresAt
	}
	return e
}

// EngineNotReportedMessage is the hold's message before readiness reported on Argo CD.
const EngineNotReportedMessage = "readiness has not reported on Argo CD yet (it does when it starts, and every 5 minutes): check that readiness runs and reaches NATS"

// Suspension is what the engine suspension asks for.
type Suspension struct {
	// Refused explains why spec.suspendEngine is not applied yet: a step is in flight and
	// cannot become ready with automated sync off ("" when it is not refused).
	Refused string
	// Write is true when every owned Application is to be written again, with automated sync
	// off when Suspend, else on.
	Write   bool
	Suspend bool
	// Tag distinguishes the writes of one generation ("suspend-g<generation>",
	// "resume-g<generation>"), so each runtime edit writes once.
	Tag string
}

// EngineSuspension decides spec.suspendEngine for a runtime as read (its Ready condition says
// whether the Applications were last written suspended, and at which generation), with the
// rollout in flight (may be nil). Suspending waits while a step is in progress or blocked;
// it is written once per generation; turning it off writes automated sync on again once.
func EngineSuspension(rt *v1alpha1.ClusterRuntime, inflight *v1alpha1.RuntimeRollout) Suspension {
	prev := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
	wasSuspended := prev != nil && prev.Reason == v1alpha1.ReasonEngineSuspended
	if !rt.Spec.SuspendEngine {
		if wasSuspended {
			return Suspension{Write: true, Suspend: false, Tag: fmt.Sprintf("resume-g%d", rt.Generation)}
		}
		return Suspension{}
	}
	if inflight != nil {
		for i := range inflight.Status.Steps {
			if s := &inflight.Status.Steps[i]; inFlight(s) {
				return Suspension{Refused: fmt.Sprintf("step %d/%d %s (%s) of rollout %s is in flight; automated sync is turned off once it finishes",
					s.Index, len(inflight.Status.Steps), s.Release, s.Action, inflight.Name)}
			}
		}
	}
	if wasSuspended && prev.ObservedGeneration == rt.Generation {
		return Suspension{}
	}
	return Suspension{Write: true, Suspend: true, Tag: fmt.Sprintf("suspend-g%d", rt.Generation)}
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
