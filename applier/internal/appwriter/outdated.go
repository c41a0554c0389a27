package appwriter

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// outdatedBy says why a rollout step's command must not touch an Application that a step of
// another rollout wrote after this command's step started, or "" when it may. Commands are
// acknowledged after they are carried out, so an applier that stops in between gets the
// command again once its acknowledgement wait ends (bus.AckWait), by when later rollouts may
// have written the release (make chaos: an Application "went back" to an earlier rollout's
// values). Rollouts of a runtime run one after the other, so the later start wins.
//
// Repairs and suspension writes (step IDs "repair/...") and steps of the same rollout are
// never compared, and neither is anything without a parseable start: the guard only refuses
// when the Application's own annotations prove a later rollout step wrote it. Start times have
// one-second precision; a start in the same second is not later.
func outdatedBy(annotations map[string]string, step bus.StepRef) string {
	if step.Rollout == "" || step.Started.IsZero() {
		return ""
	}
	prevID := annotations[v1alpha1.AnnotationStep]
	if prevID == "" || prevID == step.ID || strings.HasPrefix(prevID, "repair/") {
		return ""
	}
	i := strings.LastIndexByte(prevID, '/')
	if i <= 0 || prevID[:i] == step.Rollout {
		return ""
	}
	prevStarted, err := time.Parse(time.RFC3339, annotations[v1alpha1.AnnotationStepStarted])
	if err != nil {
		return ""
	}
	started := step.Started.UTC().Truncate(time.Second)
	if !started.Before(prevStarted) {
		return ""
	}
	return fmt.Sprintf("step %s (started %s) of a later rollout wrote the Application after this command's step %s started (%s); a command redelivered after its rollout ended is not carried out",
		prevID, prevStarted.UTC().Format(time.RFC3339), step.ID, started.Format(time.RFC3339))
}
