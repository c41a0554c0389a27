package rollout

import (
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Live is what the planner's drift check read of a release's Application (from its informer).
type Live struct {
	// Exists is false when there is no Application of the release's name.
	Exists bool
	// Deleting: the Application has a deletion timestamp.
	Deleting bool
	// Step and StepRolloutUID are its operator.aicr.run/step and step-rollout-uid annotations.
	Step, StepRolloutUID string
	// PlanDigest is its operator.aicr.run/plan-digest annotation; PlanDigestOurs says that the
	// operator's apply still owns it (no other field manager took it over).
	PlanDigest     string
	PlanDigestOurs bool
	// GoneStep and GoneStepRolloutUID, when the release has no Application, are the step
	// annotations of the one last seen deleted under its name (empty when none was seen: a
	// planner that started since remembers none).
	GoneStep, GoneStepRolloutUID string
}

// ExpectedPlan is the plan a release's Application must be at now, judged from state: what the
// stack holds (h, rollout.Held, the rollout in flight included) and the Application itself.
// judge is false when nothing is to be checked: the release is not part of the stack, a Remove
// step of it started, or a forward step of the rollout in flight started and its write has not
// landed yet (that write sets every field). A forward step whose write landed and whose
// Application was deleted since is judged (at the rollout's plan, so the deletion is seen and
// the step's command goes out again): its write landed when readiness judged an Application the
// step wrote (the step has a verdict) or the Application seen deleted carried the step. Then:
//
//   - a release whose step in flight (or succeeded) wrote the Application, by its step and
//     rollout UID annotations, must be at that rollout's plan;
//   - an Application whose plan-digest annotation the operator's own write still owns (nobody
//     took it over) is judged at that plan: a repair forces fields back, it never moves a
//     release from one plan to another. Moving is a rollout's work, and a check that read the
//     runtime or the rollouts a moment before a rollout's last write would otherwise roll that
//     write back (and rewrite every release a rollout left alone, whose annotation names the
//     plan it was written from);
//   - any other release (deleted, or its plan-digest edited by someone else) is at the plan it
//     was last written from (h.Digests).
func ExpectedPlan(h Holding, inflight *v1alpha1.RuntimeRollout, release string, live Live) (digest string, judge bool) {
	if inflight != nil {
		if s := StepFor(inflight, release); s != nil && s.StartedAt != nil {
			if s.Action == v1alpha1.ActionRemove {
				return "", false
			}
			if live.Exists && live.Step == v1alpha1.StepID(inflight.Name, s.Index) && live.StepRolloutUID == string(inflight.UID) {
				return inflight.Spec.ToDigest, true
			}
			if s.State != v1alpha1.StepSucceeded {
				if !live.Exists && stepWrote(inflight, s, live) {
					return inflight.Spec.ToDigest, true // written, then deleted: the step writes it again
				}
				return "", false // its write is on its way, or was refused: the step says
			}
		}
	}
	digest, ok := h.Digests[release]
	if !ok {
		return "", false
	}
	if live.Exists && live.PlanDigestOurs && live.PlanDigest != "" {
		return live.PlanDigest, true
	}
	return digest, true
}

// HoldsDrift reports whether the rollout holds drift of release a report that it ended
// would clear: the release in its Drifted condition, or its step in flight SpecDrifted.
func HoldsDrift(r *v1alpha1.RuntimeRollout, release string) bool {
	if _, ok := Drifted(r)[release]; ok {
		return true
	}
	s := StepFor(r, release)
	return s != nil && s.Reason == v1alpha1.ReasonSpecDrifted
}

// stepWrote reports whether the step's write of a release with no Application had landed before
// the Application went: readiness judged an Application the step wrote (the step holds a
// verdict, which is only ever recorded for its own step and rollout), or the Application last
// seen deleted carried the step.
func stepWrote(r *v1alpha1.RuntimeRollout, s *v1alpha1.Step, live Live) bool {
	if s.Verdict != nil {
		return true
	}
	return live.GoneStep != "" && live.GoneStep == v1alpha1.StepID(r.Name, s.Index) && live.GoneStepRolloutUID == string(r.UID)
}
