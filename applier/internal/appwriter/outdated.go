package appwriter

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// outdatedBy says why a rollout step's command must not touch an Application that a step of
// another rollout wrote after this command's step was decided, or "" when it may. Commands are
// acknowledged after they are carried out, so an applier that stops in between gets the
// command again once its acknowledgement wait ends (bus.AckWait), and one that was paused
// mid-command resumes it, by when later rollouts may have written the release (make chaos: an
// Application "went back" to an earlier rollout's values).
//
// Commands are ordered by their tokens (bus.StepRef.Seq, written as the Application's
// operator.aicr.run/step-seq), never by their steps' starts: those are stamped by the clocks
// of planners that may disagree. A command whose token is before the Application's is
// outdated; one after it may write. The same step written again (a redelivery) or a step of
// the same rollout never is. When the tokens cannot be ordered (either is missing: a planner
// or an Application of the version before them, or a repair decided from no rollout), a
// rollout step's command asks whether its rollout has ended (ask is true; rolloutEnded): while
// it runs no later rollout has written the release. A repair's command without a token is
// never refused.
func outdatedBy(annotations map[string]string, step bus.StepRef) (why string, ask bool) {
	prevID := annotations[v1alpha1.AnnotationStep]
	if prevID == "" {
		return "", false
	}
	prevUID := annotations[v1alpha1.AnnotationStepRolloutUID]
	if v1alpha1.StepToken(prevID, prevUID) == v1alpha1.StepToken(step.ID, step.RolloutUID) {
		return "", false
	}
	prevSeq := annotations[v1alpha1.AnnotationStepSeq]
	if c, ok := v1alpha1.CompareSeq(step.Seq, prevSeq); ok {
		if c >= 0 {
			return "", false
		}
		return fmt.Sprintf("step %s (ordering token %s) wrote the Application after this command's step %s (token %s) was decided; a command redelivered after a later step wrote its release is not carried out",
			prevID, prevSeq, step.ID, step.Seq), false
	}
	if step.Rollout == "" {
		return "", false
	}
	if sameRollout(prevID, prevUID, step) {
		return "", false
	}
	return "", true
}

// sameRollout reports whether the step that wrote an Application (prevID, prevUID) belongs to
// the rollout of step: the same rollout UID, or, when either lacks one, the same rollout name.
func sameRollout(prevID, prevUID string, step bus.StepRef) bool {
	if prevUID != "" && step.RolloutUID != "" {
		return prevUID == step.RolloutUID
	}
	i := strings.LastIndexByte(prevID, '/')
	return i > 0 && !strings.HasPrefix(prevID, "repair/") && prevID[:i] == step.Rollout
}

// Rollouts reports whether a rollout has ended, and whether it removes a release. It must read the API server, not a cache: the
// answer decides a write that no resourceVersion guards against the rollout's state.
type Rollouts interface {
	// Ended returns the rollout's phase and whether it is terminal; a rollout that no longer
	// exists has ended, and so has one whose UID is not uid (when uid is set: the rollout was
	// deleted and another created under its name).
	Ended(ctx context.Context, name, uid string) (phase string, ended bool, err error)
	// RemoveInProgress reports whether the rollout is removing release now
	// (v1alpha1.RuntimeRollout.RemoveInProgress); a rollout that no longer exists is not.
	RemoveInProgress(ctx context.Context, name, release string) (bool, error)
}

// rolloutEnded resolves outdatedBy's unordered case, for an Application whose last step is
// another rollout's or a repair's: it says why the command is outdated when its own rollout has ended, or ""
// when it has not. A runtime's rollouts run one at a time (a rollout that started a step is
// waited for, never superseded), so while the command's rollout runs no later one has written
// the Application; and the read that showed the other rollout's step came before this check, so
// if a later rollout wrote it, the command's rollout had ended by then.
func (w *Writer) rolloutEnded(ctx context.Context, step bus.StepRef, prevID string) (string, error) {
	phase, ended, err := w.rollouts.Ended(ctx, step.Rollout, step.RolloutUID)
	if err != nil {
		return "", fmt.Errorf("read rollout %s: %w", step.Rollout, err)
	}
	if !ended {
		return "", nil
	}
	if phase == "" {
		phase = "deleted"
	}
	return fmt.Sprintf("rollout %s has ended (%s) and step %s, which carries no ordering token to compare with this command's step %s, wrote the Application; a command carried out after its rollout ended is not carried out",
		step.Rollout, phase, prevID, step.ID), nil
}

// changedSince says why a repair is outdated, or "": the Application it was decided from
// (basis, see bus.Basis) was deleted, replaced, or written by another step or repair since. A
// repair redelivered after its own write (the live step token is its token) is not outdated,
// and a command without a basis (a rollout step's, ordered by outdatedBy, or an older
// planner's) never is here. live is nil when there is no Application.
func changedSince(live *argoapp.Application, basis *bus.Basis, token string) string {
	if basis == nil {
		return ""
	}
	var cur string
	if live != nil {
		cur = v1alpha1.AnnotatedStepToken(live.Annotations)
		if cur == token {
			return ""
		}
	}
	decided := "no Application"
	if basis.UID != "" {
		decided = fmt.Sprintf("Application UID %s at resourceVersion %s, written by %s", basis.UID, basis.ResourceVersion, cmp.Or(basis.Step, "no step"))
	}
	switch {
	case live == nil && basis.UID == "":
		return ""
	case live == nil:
		return "the repair was decided from " + decided + ", which has been deleted since; the drift check decides again"
	case string(live.UID) != basis.UID:
		return fmt.Sprintf("the repair was decided from %s; the Application is now UID %s, written by %s; the drift check decides again", decided, live.UID, cmp.Or(cur, "no step"))
	case cur != basis.Step:
		return fmt.Sprintf("the repair was decided from %s; %s has written the Application since; the drift check decides again", decided, cmp.Or(cur, "someone removing its step"))
	}
	return ""
}
