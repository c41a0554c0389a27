package appwriter

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// TestDecideApply is an Apply's decision on the Application it read, the questions it asks
// before deciding, and which refusals it decides again on a fresh read when the cache served
// the Application.
func TestDecideApply(t *testing.T) {
	t.Parallel()
	const appUID = "5e1f0000-4444-4c2b-9d7e-000000000004"
	owned := func(edits ...func(a *argoapp.Application)) *argoapp.Application {
		a := &argoapp.Application{}
		a.Name, a.Namespace, a.UID = "gpu-operator", testEngineNS, appUID
		a.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
		a.Annotations = map[string]string{v1alpha1.AnnotationRuntimeUID: testRuntimeUID}
		for _, e := range edits {
			e(a)
		}
		return a
	}
	writtenBy := func(id, uid, seq string) func(a *argoapp.Application) {
		return func(a *argoapp.Application) {
			a.Annotations[v1alpha1.AnnotationStep] = id
			if uid != "" {
				a.Annotations[v1alpha1.AnnotationStepRolloutUID] = uid
			}
			if seq != "" {
				a.Annotations[v1alpha1.AnnotationStepSeq] = seq
			}
		}
	}
	foreign := func(a *argoapp.Application) { delete(a.Labels, v1alpha1.LabelManagedBy) }
	deleting := func(a *argoapp.Application) { a.DeletionTimestamp = &metav1.Time{} }
	finalizer := func(a *argoapp.Application) { a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer} }
	laterStep := writtenBy("r-new/5", "uid-new", "9000")                        // ordered after testSeq
	unordered := writtenBy("r-new/5", "uid-new", "")                            // no token: ask
	repairBasis := func(uid types.UID, step string) func(c *bus.ApplyCommand) { // a repair's command
		return func(c *bus.ApplyCommand) {
			c.Step = bus.StepRef{ID: "repair/0123456789ab/tag", Started: testStarted}
			c.Basis = &bus.Basis{UID: string(uid), ResourceVersion: "7", Step: step}
		}
	}
	p, _ := testPlan(t, "hello")
	answer := func(s string) *string { return &s }
	tests := map[string]struct {
		live      *argoapp.Application
		fromCache bool
		cmd       func(c *bus.ApplyCommand)
		ended     *string
		unarmed   *string
		want      applyAction
		why       string
	}{
		"no Application: create":                         {want: applyWrite},
		"the runtime's Application: write":               {live: owned(), want: applyWrite},
		"the runtime's Application from the cache":       {live: owned(), fromCache: true, want: applyWrite},
		"an earlier step wrote it":                       {live: owned(writtenBy("r-old/2", "uid-old", "100")), want: applyWrite},
		"not the runtime's":                              {live: owned(foreign), want: applyForeign, why: "label app.kubernetes.io/managed-by is missing (want \"aicr-operator\")"},
		"not the runtime's, from the cache":              {live: owned(foreign), fromCache: true, want: applyStale},
		"not the runtime's and overtaken: foreign first": {live: owned(foreign, laterStep), want: applyForeign, why: "label app.kubernetes.io/managed-by is missing (want \"aicr-operator\")"},
		"a later step wrote it":                          {live: owned(laterStep), want: applyOutdated},
		"a later step wrote it, from the cache":          {live: owned(laterStep), fromCache: true, want: applyStale},
		"unordered: ask whether the rollout ended":       {live: owned(unordered), want: applyAskEnded},
		"unordered, from the cache: ask too":             {live: owned(unordered), fromCache: true, want: applyAskEnded},
		"unordered, the rollout runs":                    {live: owned(unordered), ended: answer(""), want: applyWrite},
		"unordered, the rollout ended":                   {live: owned(unordered), ended: answer("rollout ended"), want: applyOutdated, why: "rollout ended"},
		"unordered, the rollout ended, from the cache":   {live: owned(unordered), fromCache: true, ended: answer("rollout ended"), want: applyStale},
		"being deleted":                                  {live: owned(deleting), want: applyDeleting},
		"being deleted, from the cache":                  {live: owned(deleting), fromCache: true, want: applyStale},
		"overtaken and being deleted: outdated first":    {live: owned(laterStep, deleting), want: applyOutdated},
		"the finalizer: ask whether a Remove armed it":   {live: owned(finalizer), want: applyAskArmed},
		"the finalizer armed by a Remove in progress":    {live: owned(finalizer), unarmed: answer(""), want: applyWrite},
		"the finalizer set by hand":                      {live: owned(finalizer), unarmed: answer("without the annotation"), want: applyBlocked, why: "without the annotation"},
		"the finalizer, from the cache":                  {live: owned(finalizer), fromCache: true, want: applyStale},
		"being deleted with the finalizer: wait":         {live: owned(deleting, finalizer), want: applyDeleting},
		"a repair decided from this Application":         {live: owned(writtenBy("r-old/2", "uid-old", "")), cmd: repairBasis(appUID, v1alpha1.StepToken("r-old/2", "uid-old")), want: applyWrite},
		"a repair decided from a replaced Application":   {live: owned(), cmd: repairBasis("other-uid", ""), want: applyOutdated},
		"a repair decided from a deleted Application":    {cmd: repairBasis("other-uid", ""), want: applyOutdated},
		"a repair decided from no Application":           {cmd: repairBasis("", ""), want: applyWrite},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := applyCmd(p, "gpu-operator", 6)
			if tc.cmd != nil {
				tc.cmd(cmd)
			}
			token := v1alpha1.StepToken(cmd.Step.ID, cmd.Step.RolloutUID)
			act, why := decideApply(applyFacts{live: tc.live, fromCache: tc.fromCache, cmd: cmd, token: token, ended: tc.ended, unarmed: tc.unarmed})
			if act != tc.want {
				t.Fatalf("decideApply = %d (%q), want %d", act, why, tc.want)
			}
			if tc.why != "" && why != tc.why {
				t.Errorf("why = %q, want %q", why, tc.why)
			}
			refuses := act == applyOutdated || act == applyForeign || act == applyBlocked
			if refuses && why == "" {
				t.Errorf("a refusal (%d) says no why", act)
			}
		})
	}
}
