package rollout

import (
	"sort"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Holding is what each release of the stack was last written from: the active plan, except
// where a rollout since the active plan became active moved it. Nothing is rolled back, so a
// rollout that ended without reaching its plan (failed, expired, revoked) leaves the releases
// it wrote at its plan; repairs and the next rollout's steps start from here, not from the
// active plan.
type Holding struct {
	// Digests maps each release the stack holds to the plan it was last written from.
	Digests map[string]string
	// Unsure are releases a forward step started on that did not succeed: whatever they hold,
	// they were not judged ready at it, so the next rollout gives them a step even when their
	// plan's release is unchanged.
	Unsure map[string]bool
}

// Held folds, over the active plan's releases, the rollouts of runtimeUID that moved the stack
// from the active plan since it became active (after the latest rollout that succeeded to it
// finished) and did not reach their plan, or are still in flight, oldest first: a forward step
// that succeeded, or that readiness judged (the Application carried its write), leaves its
// release at the rollout's plan; a forward step that started and did not succeed leaves it
// unsure; a Remove step that succeeded removes it. rollouts may hold any rollouts of the
// runtime, in any order.
func Held(active []string, activeDigest string, rollouts []v1alpha1.RuntimeRollout, runtimeUID string) Holding {
	h := Holding{Digests: make(map[string]string, len(active)), Unsure: map[string]bool{}}
	for _, n := range active {
		h.Digests[n] = activeDigest
	}
	_, moved := heldFrom(activeDigest, rollouts, runtimeUID)
	for _, r := range moved {
		for i := range r.Status.Steps {
			s := &r.Status.Steps[i]
			switch {
			case s.Action == v1alpha1.ActionRemove:
				if s.State == v1alpha1.StepSucceeded {
					delete(h.Digests, s.Release)
					delete(h.Unsure, s.Release)
				}
			case s.State == v1alpha1.StepSucceeded:
				h.Digests[s.Release] = r.Spec.ToDigest
				delete(h.Unsure, s.Release)
			case s.StartedAt != nil:
				h.Unsure[s.Release] = true
				if s.Verdict != nil {
					h.Digests[s.Release] = r.Spec.ToDigest // readiness judged the step's write
				}
			}
		}
	}
	return h
}

// Moved reports whether the stack holds something other than the active plan: a release at
// another plan, one the active plan does not have, or one left unsure.
func (h Holding) Moved(activeDigest string, active []string) bool {
	if len(h.Unsure) > 0 || len(h.Digests) != len(active) {
		return true
	}
	for _, n := range active {
		if h.Digests[n] != activeDigest {
			return true
		}
	}
	return false
}

// Plans lists the digests the stack holds releases of, sorted.
func (h Holding) Plans() []string {
	set := map[string]bool{}
	for _, d := range h.Digests {
		set[d] = true
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// heldFrom returns the rollouts Held reads: since, the latest rollout of runtimeUID that
// succeeded to activeDigest (nil when none is left), and moved, the rollouts from activeDigest
// since then that did not reach their plan or are still in flight, oldest first.
func heldFrom(activeDigest string, rollouts []v1alpha1.RuntimeRollout, runtimeUID string) (since *v1alpha1.RuntimeRollout, moved []*v1alpha1.RuntimeRollout) {
	for i := range rollouts {
		r := &rollouts[i]
		if r.Spec.RuntimeUID == runtimeUID && r.Status.Phase == v1alpha1.PhaseSucceeded && r.Spec.ToDigest == activeDigest && r.Status.FinishedAt != nil &&
			(since == nil || since.Status.FinishedAt.Before(r.Status.FinishedAt)) {
			since = r
		}
	}
	for i := range rollouts {
		r := &rollouts[i]
		if r.Spec.RuntimeUID != runtimeUID || r.Spec.FromDigest != activeDigest {
			continue
		}
		switch r.Status.Phase {
		case v1alpha1.PhaseSucceeded, v1alpha1.PhaseSuperseded, "":
			continue
		}
		if since != nil && r.CreationTimestamp.Before(since.Status.FinishedAt) && r != since {
			continue // from an earlier time the same plan was active
		}
		moved = append(moved, r)
	}
	sort.SliceStable(moved, func(i, j int) bool { return moved[i].CreationTimestamp.Before(&moved[j].CreationTimestamp) })
	return since, moved
}
