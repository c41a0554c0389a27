package appwriter

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

func TestOutdatedBy(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	written := func(id string, started time.Time) map[string]string {
		return map[string]string{v1alpha1.AnnotationStep: id, v1alpha1.AnnotationStepStarted: started.Format(time.RFC3339)}
	}
	step := bus.StepRef{Rollout: "r-old", Index: 6, ID: "r-old/6", Started: t0.Add(300 * time.Millisecond)}
	tests := map[string]struct {
		annotations map[string]string
		step        bus.StepRef
		outdated    bool
		sameSecond  bool
	}{
		"a later rollout's step wrote it":             {annotations: written("r-new/5", t0.Add(2*time.Second)), step: step, outdated: true},
		"an earlier rollout's step wrote it":          {annotations: written("r-older/2", t0.Add(-time.Minute)), step: step},
		"a later step in the same second":             {annotations: written("r-new/5", t0), step: step, sameSecond: true},
		"an earlier step in the same second":          {annotations: written("r-older/2", t0.Add(900*time.Millisecond)), step: step, sameSecond: true},
		"the same step wrote it (a retry)":            {annotations: written("r-old/6", t0.Add(time.Minute)), step: step},
		"another step of the same rollout":            {annotations: written("r-old/2", t0.Add(time.Minute)), step: step},
		"a repair wrote it since":                     {annotations: written("repair/0123456789ab/suspend-g3", t0.Add(time.Minute)), step: step},
		"never written by a step":                     {annotations: map[string]string{}, step: step},
		"an unreadable start":                         {annotations: map[string]string{v1alpha1.AnnotationStep: "r-new/5", v1alpha1.AnnotationStepStarted: "yesterday"}, step: step},
		"a repair command is not a rollout step":      {annotations: written("r-new/5", t0.Add(time.Minute)), step: bus.StepRef{ID: "repair/0123456789ab/tag", Started: t0}},
		"a command without a start is never outdated": {annotations: written("r-new/5", t0.Add(time.Minute)), step: bus.StepRef{Rollout: "r-old", ID: "r-old/6"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			why, same := outdatedBy(tc.annotations, tc.step)
			if (why != "") != tc.outdated || same != tc.sameSecond {
				t.Fatalf("outdatedBy = %q, %v; want outdated %v, same second %v", why, same, tc.outdated, tc.sameSecond)
			}
			if tc.outdated && (!strings.Contains(why, "r-new/5") || !strings.Contains(why, "r-old/6")) {
				t.Errorf("message %q does not name both steps", why)
			}
		})
	}
}
