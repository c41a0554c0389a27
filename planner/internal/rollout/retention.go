package rollout

import (
	"sort"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// DefaultHistoryLimit is how many ended rollouts a runtime keeps when spec.rollout.historyLimit
// is not set.
const DefaultHistoryLimit = 10

// Prunable returns the rollouts retention deletes, oldest first: of the ended ones (a terminal
// phase, or a rollout of an earlier runtime of the same name, which nothing advances), all but
// the newest limit (DefaultHistoryLimit when limit < 1), except those Held still reads for
// activeDigest (the latest success to it and the rollouts since then that did not reach their
// plan): what the stack holds is never forgotten. Ended rollouts are ordered by their
// status.sequence (createdBefore), never by a clock; a rollout in flight is never returned.
func Prunable(rollouts []v1alpha1.RuntimeRollout, runtimeUID, activeDigest string, limit int) []*v1alpha1.RuntimeRollout {
	if limit < 1 {
		limit = DefaultHistoryLimit
	}
	var ended []*v1alpha1.RuntimeRollout
	for i := range rollouts {
		if r := &rollouts[i]; r.Status.Phase.Terminal() || r.Spec.RuntimeUID != runtimeUID {
			ended = append(ended, r)
		}
	}
	if len(ended) <= limit {
		return nil
	}
	sort.SliceStable(ended, func(i, j int) bool { return createdBefore(ended[i], ended[j]) })
	since, moved := heldFrom(activeDigest, rollouts, runtimeUID)
	needed := map[*v1alpha1.RuntimeRollout]bool{since: true}
	for _, r := range moved {
		needed[r] = true
	}
	var out []*v1alpha1.RuntimeRollout
	for _, r := range ended[:len(ended)-limit] {
		if !needed[r] {
			out = append(out, r)
		}
	}
	return out
}

// PlansInUse adds to keep the plans the rollouts name (from and to), which stay as long as
// the rollouts do.
func PlansInUse(keep map[string]bool, rollouts []v1alpha1.RuntimeRollout, dropped []*v1alpha1.RuntimeRollout) {
	gone := make(map[*v1alpha1.RuntimeRollout]bool, len(dropped))
	for _, r := range dropped {
		gone[r] = true
	}
	for i := range rollouts {
		if r := &rollouts[i]; !gone[r] {
			keep[r.Spec.FromDigest] = true
			keep[r.Spec.ToDigest] = true
		}
	}
	delete(keep, "")
}

// createdBefore orders rollouts by creation without a clock: by status.sequence (a
// resourceVersion) when both carry one; one without (an earlier planner's, or never written)
// comes first, and two without are ordered by creation time, then name.
func createdBefore(a, b *v1alpha1.RuntimeRollout) bool {
	_, aok := v1alpha1.CompareSeq(a.Status.Sequence, a.Status.Sequence)
	_, bok := v1alpha1.CompareSeq(b.Status.Sequence, b.Status.Sequence)
	switch {
	case aok && bok:
		c, _ := v1alpha1.CompareSeq(a.Status.Sequence, b.Status.Sequence)
		return c < 0
	case aok != bok:
		return bok
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp) ||
		(a.CreationTimestamp.Equal(&b.CreationTimestamp) && a.Name < b.Name)
}
