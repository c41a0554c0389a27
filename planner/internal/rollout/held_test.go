package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// A rollout that ended without reaching its plan leaves the releases it wrote at its plan:
// what the stack holds is folded from the active plan and such rollouts, never assumed to be
// the active plan.
func TestHeld(t *testing.T) {
	t.Parallel()
	a := mkPlan(t, comp{name: "a"}, comp{name: "b"}, comp{name: "c"})
	b := mkPlan(t, comp{name: "a", ver: 1}, comp{name: "b", ver: 1}, comp{name: "d"})
	active := []string{"a", "b", "c"}
	const uid = "rt-uid"
	at := func(r *v1alpha1.RuntimeRollout, created, finished time.Duration) v1alpha1.RuntimeRollout {
		r.Spec.RuntimeUID = uid
		r.CreationTimestamp = metav1.NewTime(t0.Add(created))
		if finished > 0 {
			f := metav1.NewTime(t0.Add(finished))
			r.Status.FinishedAt = &f
		}
		return *r
	}
	// The rollout that made a active.
	install := newRollout(t, nil, a, plan.StepOptions{})
	install.Status.Phase = v1alpha1.PhaseSucceeded
	// a -> b: a's step succeeded, b's was written (judged, not ready) when the rollout failed,
	// d's never started; c's Remove never ran.
	failed := func() *v1alpha1.RuntimeRollout {
		r := newRollout(t, a, b, plan.StepOptions{})
		r.Spec.RuntimeUID = uid
		Advance(r, env(t0))
		ObserveVerdict(r, ready(r, StepFor(r, "a").Index), t0)
		Advance(r, env(t0))
		notReady := ready(r, StepFor(r, "b").Index)
		notReady.Ready = false
		ObserveVerdict(r, notReady, t0)
		Advance(r, env(t0.Add(DefaultActionTimeout)))
		if r.Status.Phase != v1alpha1.PhaseFailed {
			t.Fatalf("setup: rollout %s, want Failed (%s)", r.Status.Phase, states(r))
		}
		return r
	}
	tests := map[string]struct {
		rollouts []v1alpha1.RuntimeRollout
		want     Holding
		moved    bool
	}{
		"only the active plan": {
			rollouts: []v1alpha1.RuntimeRollout{at(install, 0, time.Minute)},
			want:     Holding{Digests: map[string]string{"a": a.Digest(), "b": a.Digest(), "c": a.Digest()}, Unsure: map[string]bool{}},
		},
		"a failed rollout leaves what it wrote at its plan, and what it started unsure": {
			rollouts: []v1alpha1.RuntimeRollout{at(install, 0, time.Minute), at(failed(), 2*time.Minute, 0)},
			want:     Holding{Digests: map[string]string{"a": b.Digest(), "b": b.Digest(), "c": a.Digest()}, Unsure: map[string]bool{"b": true}},
			moved:    true,
		},
		"a failed rollout of another runtime is not this stack's": {
			rollouts: []v1alpha1.RuntimeRollout{at(install, 0, time.Minute), func() v1alpha1.RuntimeRollout {
				r := at(failed(), 2*time.Minute, 0)
				r.Spec.RuntimeUID = "other"
				return r
			}()},
			want: Holding{Digests: map[string]string{"a": a.Digest(), "b": a.Digest(), "c": a.Digest()}, Unsure: map[string]bool{}},
		},
		"a failed rollout from before the active plan became active again is history": {
			rollouts: []v1alpha1.RuntimeRollout{at(failed(), 0, 0), at(install, time.Minute, 2*time.Minute)},
			want:     Holding{Digests: map[string]string{"a": a.Digest(), "b": a.Digest(), "c": a.Digest()}, Unsure: map[string]bool{}},
		},
	}
	t.Run("a failed first install leaves what it wrote", func(t *testing.T) {
		r := newRollout(t, nil, a, plan.StepOptions{})
		r.Spec.RuntimeUID = uid
		Advance(r, env(t0))
		ObserveVerdict(r, ready(r, 1), t0)
		Advance(r, env(t0.Add(DefaultActionTimeout)))
		got := Held(nil, "", []v1alpha1.RuntimeRollout{at(r, 0, 0)}, uid)
		first := Step(r, 1).Release
		if got.Digests[first] != a.Digest() || len(got.Digests) != 1 || !got.Unsure[Step(r, 2).Release] || !got.Moved("", nil) {
			t.Errorf("held %+v after a first install that failed at step 2", got)
		}
	})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Held(active, a.Digest(), tc.rollouts, uid)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			if m := got.Moved(a.Digest(), active); m != tc.moved {
				t.Errorf("moved = %v, want %v", m, tc.moved)
			}
		})
	}
}

// The next rollout after a failed one starts from what each release holds: a release the failed
// rollout moved and the new plan gives back its active version gets a step, one it left unsure
// gets one even when unchanged, and one only the failed plan installed is removed.
func TestStepsFromWhatIsHeld(t *testing.T) {
	t.Parallel()
	a := mkPlan(t, comp{name: "a"}, comp{name: "b"}, comp{name: "c"})
	b := mkPlan(t, comp{name: "a", ver: 1}, comp{name: "b", ver: 1}, comp{name: "c"}, comp{name: "d"})
	c := mkPlan(t, comp{name: "a"}, comp{name: "b", ver: 1}, comp{name: "c", ver: 2})
	h := Holding{
		Digests: map[string]string{"a": b.Digest(), "b": b.Digest(), "c": a.Digest(), "d": b.Digest()},
		Unsure:  map[string]bool{"b": true},
	}
	var releases []plan.Release
	for name, d := range h.Digests {
		p := map[string]*plan.Plan{a.Digest(): a, b.Digest(): b}[d]
		r, _ := p.Release(name)
		releases = append(releases, *r)
	}
	held, err := plan.Compose(a.Bundle, releases)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v1alpha1.StepAction{}
	for _, s := range plan.Steps(held, c, plan.StepOptions{Force: h.Unsure}) {
		got[s.Release] = s.Action
	}
	want := map[string]v1alpha1.StepAction{
		"a": v1alpha1.ActionUpgrade, // at b's version; c has a's again: the active plan says no step
		"b": v1alpha1.ActionApply,   // unchanged from b, but never judged ready there
		"c": v1alpha1.ActionUpgrade,
		"d": v1alpha1.ActionRemove, // only the failed plan installed it
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// From the active plan, a would get no step and stay at the failed plan's version.
	for _, s := range plan.Steps(a, c, plan.StepOptions{}) {
		if s.Release == "a" || s.Release == "d" {
			t.Errorf("from the active plan %s gets a %s step: the test does not show the blind spot", s.Release, s.Action)
		}
	}
}
