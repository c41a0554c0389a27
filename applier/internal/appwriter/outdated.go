package appwriter

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// outdatedBy says why a rollout step's command must not touch an Application that a step of
// another rollout wrote after this command's step started, or "" when it may. Commands are
// acknowledged after they are carried out, so an applier that stops in between gets the
// command again once its acknowledgement wait ends (bus.AckWait), and one that was paused
// mid-command resumes it, by when later rollouts may have written the release (make chaos: an
// Application "went back" to an earlier rollout's values). Rollouts of a runtime run one after
// the other, so the later start wins.
//
// Repairs and suspension writes (step IDs "repair/...") and steps of the same rollout are
// never compared, and neither is anything without a parseable start: the guard only refuses
// when the Application's own annotations prove a later rollout step wrote it. Start times have
// one-second precision: when the other rollout's step started in the same second, the
// annotations cannot tell which rollout came later, and sameSecond is true; the caller then
// asks whether the command's rollout has ended (rolloutEnded).
func outdatedBy(annotations map[string]string, step bus.StepRef) (why string, sameSecond bool) {
	if step.Rollout == "" || step.Started.IsZero() {
		return "", false
	}
	prevID := annotations[v1alpha1.AnnotationStep]
	if prevID == "" || prevID == step.ID || strings.HasPrefix(prevID, "repair/") {
		return "", false
	}
	i := strings.LastIndexByte(prevID, '/')
	if i <= 0 || prevID[:i] == step.Rollout {
		return "", false
	}
	prevStarted, err := time.Parse(time.RFC3339, annotations[v1alpha1.AnnotationStepStarted])
	if err != nil {
		return "", false
	}
	started := step.Started.UTC().Truncate(time.Second)
	switch {
	case started.Equal(prevStarted.UTC()):
		return "", true
	case started.After(prevStarted):
		return "", false
	}
	return fmt.Sprintf("step %s (started %s) of a later rollout wrote the Application after this command's step %s started (%s); a command redelivered after its rollout ended is not carried out",
		prevID, prevStarted.UTC().Format(time.RFC3339), step.ID, started.Format(time.RFC3339)), false
}

// Rollouts reports whether a rollout has ended, and whether it removes a release. It must read the API server, not a cache: the
// answer decides a write that no resourceVersion guards against the rollout's state.
type Rollouts interface {
	// Ended returns the rollout's phase and whether it is terminal; a rollout that no longer
	// exists has ended.
	Ended(ctx context.Context, name string) (phase string, ended bool, err error)
	// RemoveInProgress reports whether the rollout is removing release now
	// (v1alpha1.RuntimeRollout.RemoveInProgress); a rollout that no longer exists is not.
	RemoveInProgress(ctx context.Context, name, release string) (bool, error)
}

// rolloutEnded resolves outdatedBy's same-second case, for an Application whose last step is
// another rollout's: it says why the command is outdated when its own rollout has ended, or ""
// when it has not. A runtime's rollouts run one at a time (a rollout that started a step is
// waited for, never superseded), so while the command's rollout runs no later one has written
// the Application; and the read that showed the other rollout's step came before this check, so
// if a later rollout wrote it, the command's rollout had ended by then.
func (w *Writer) rolloutEnded(ctx context.Context, step bus.StepRef, prevID string) (string, error) {
	phase, ended, err := w.rollouts.Ended(ctx, step.Rollout)
	if err != nil {
		return "", fmt.Errorf("read rollout %s: %w", step.Rollout, err)
	}
	if !ended {
		return "", nil
	}
	if phase == "" {
		phase = "deleted"
	}
	return fmt.Sprintf("rollout %s has ended (%s) and step %s of another rollout, started in the same second as this command's step %s, wrote the Application; a command carried out after its rollout ended is not carried out",
		step.Rollout, phase, prevID, step.ID), nil
}
