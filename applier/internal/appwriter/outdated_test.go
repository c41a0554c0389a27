package appwriter

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

func TestOutdatedBy(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	written := func(id, uid, seq string) map[string]string {
		a := map[string]string{v1alpha1.AnnotationStep: id, v1alpha1.AnnotationStepRolloutUID: uid, v1alpha1.AnnotationStepSeq: seq,
			// A start that would say the opposite of the tokens: it is never read.
			v1alpha1.AnnotationStepStarted: t0.Add(-time.Hour).Format(time.RFC3339)}
		for k, v := range a {
			if v == "" {
				delete(a, k)
			}
		}
		return a
	}
	step := bus.StepRef{Rollout: "r-old", Index: 6, ID: "r-old/6", RolloutUID: "uid-old", Started: t0, Seq: "5000"}
	noSeq := step
	noSeq.Seq = ""
	repair := bus.StepRef{ID: "repair/0123456789ab/tag", Started: t0}
	tests := map[string]struct {
		annotations map[string]string
		step        bus.StepRef
		outdated    bool
		ask         bool
	}{
		"a later step wrote it":                         {annotations: written("r-new/5", "uid-new", "5100"), step: step, outdated: true},
		"a later step wrote it (longer token)":          {annotations: written("r-new/5", "uid-new", "10000"), step: step, outdated: true},
		"an earlier step wrote it":                      {annotations: written("r-older/2", "uid-older", "900"), step: step},
		"a step decided from the same token":            {annotations: written("r-new/5", "uid-new", "5000"), step: step},
		"a later repair wrote it":                       {annotations: written("repair/0123456789ab/tag", "", "5100"), step: step, outdated: true},
		"the same step wrote it (a retry)":              {annotations: written("r-old/6", "uid-old", "4000"), step: step},
		"another step of the same rollout, no token":    {annotations: written("r-old/2", "uid-old", ""), step: step},
		"a namesake rollout's step, no token":           {annotations: written("r-old/6", "uid-namesake", ""), step: step, ask: true},
		"another rollout's step, no token":              {annotations: written("r-new/5", "uid-new", ""), step: step, ask: true},
		"a repair without a token wrote it":             {annotations: written("repair/0123456789ab/suspend-g3", "", ""), step: step, ask: true},
		"a command without a token":                     {annotations: written("r-new/5", "uid-new", "5100"), step: noSeq, ask: true},
		"a malformed token":                             {annotations: written("r-new/5", "uid-new", "05100"), step: step, ask: true},
		"never written by a step":                       {annotations: map[string]string{}, step: step},
		"a repair command without a token is not asked": {annotations: written("r-new/5", "uid-new", "5100"), step: repair},
		"a repair command with an earlier token":        {annotations: written("r-new/5", "uid-new", "5100"), step: bus.StepRef{ID: repair.ID, Seq: "5050"}, outdated: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			why, ask := outdatedBy(tc.annotations, tc.step)
			if (why != "") != tc.outdated || ask != tc.ask {
				t.Fatalf("outdatedBy = %q, %v; want outdated %v, ask %v", why, ask, tc.outdated, tc.ask)
			}
			if tc.outdated && (!strings.Contains(why, tc.annotations[v1alpha1.AnnotationStep]) || !strings.Contains(why, tc.step.ID)) {
				t.Errorf("message %q does not name both steps", why)
			}
		})
	}
}
