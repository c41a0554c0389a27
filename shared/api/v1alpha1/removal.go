package v1alpha1

import "time"

// The delete-rollout marker (AnnotationDeleteRollout) names the rollout whose Remove step
// marked an Application. Anyone who may edit the Application can set it, so it is never taken
// at its word: each reader checks it against the rollout it names with the functions below.

// RemoveStep returns the rollout's Remove step of release, or nil when it has none.
func (r *RuntimeRollout) RemoveStep(release string) *Step {
	if r == nil {
		return nil
	}
	for i := range r.Status.Steps {
		if s := &r.Status.Steps[i]; s.Release == release && s.Action == ActionRemove {
			return s
		}
	}
	return nil
}

// Ended reports whether the rollout has ended: it has an outcome or a final phase.
func (r *RuntimeRollout) Ended() bool {
	return r.Status.Phase.Terminal() || r.Status.Outcome != ""
}

// RemoveInProgress reports whether the rollout is removing release now: it has not ended and
// its Remove step of the release is InProgress. Only then may the operator write or delete an
// Application of the release that carries Argo CD's resources finalizer (the admission
// webhook and the applier check this).
func (r *RuntimeRollout) RemoveInProgress(release string) bool {
	if r == nil || r.Ended() {
		return false
	}
	s := r.RemoveStep(release)
	return s != nil && s.State == StepInProgress
}

// RemoveStartedSince reports whether the rollout started a Remove step of release no earlier
// than lastWrite, the start of the step that last wrote the Application (its
// AnnotationStepStarted; zero when unknown): a delete-rollout marker naming the rollout on that
// Application then comes from that step, whether the step is still in progress or has ended
// (an Application being deleted, or left by a Remove that failed, is not judged or repaired:
// the operator rolls nothing back). A marker on an Application written after the Remove
// started, or naming a rollout that started no Remove of the release, is not the operator's.
func (r *RuntimeRollout) RemoveStartedSince(release string, lastWrite time.Time) bool {
	s := r.RemoveStep(release)
	if s == nil || s.StartedAt == nil {
		return false
	}
	return !s.StartedAt.Time.Before(lastWrite.Truncate(time.Second))
}
