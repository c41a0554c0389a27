package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// history builds rollouts of runtime "rt-uid", created a minute apart in the order given.
type past struct {
	from, to string
	phase    v1alpha1.RolloutPhase
	uid      string // "" is the runtime's
	wrote    string // a release whose step succeeded
	seq      string // status.sequence
	sameTime bool   // created at t0, as every other sameTime one
}

func history(ps ...past) []v1alpha1.RuntimeRollout {
	out := make([]v1alpha1.RuntimeRollout, len(ps))
	for i, p := range ps {
		r := v1alpha1.RuntimeRollout{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%02d", i), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute))},
			Spec:       v1alpha1.RuntimeRolloutSpec{RuntimeUID: cmpOr(p.uid, "rt-uid"), FromDigest: p.from, ToDigest: p.to},
			Status:     v1alpha1.RuntimeRolloutStatus{Phase: p.phase, Sequence: p.seq},
		}
		if p.sameTime {
			r.CreationTimestamp = metav1.NewTime(t0)
		}
		if p.phase.Terminal() {
			f := metav1.NewTime(t0.Add(time.Duration(i)*time.Minute + 30*time.Second))
			r.Status.FinishedAt = &f
		}
		if p.wrote != "" {
			r.Status.Steps = []v1alpha1.Step{{Index: 1, Release: p.wrote, Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepSucceeded}}
		}
		out[i] = r
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func without(rs []v1alpha1.RuntimeRollout, drop []*v1alpha1.RuntimeRollout) []v1alpha1.RuntimeRollout {
	return slices.DeleteFunc(slices.Clone(rs), func(r v1alpha1.RuntimeRollout) bool {
		return slices.Contains(names(drop), r.Name)
	})
}

func TestPrunable(t *testing.T) {
	t.Parallel()
	ok, failed, inflight := v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseProgressing
	tests := map[string]struct {
		rollouts []v1alpha1.RuntimeRollout
		active   string
		limit    int
		want     []string
	}{
		"within the limit nothing goes": {
			rollouts: history(past{to: "p1", phase: ok}, past{from: "p1", to: "p2", phase: ok}),
			active:   "p2", limit: 2,
		},
		"the oldest ended rollouts beyond the limit go": {
			rollouts: history(past{to: "p1", phase: ok}, past{from: "p1", to: "p2", phase: ok}, past{from: "p2", to: "p3", phase: ok}, past{from: "p3", to: "p4", phase: ok}),
			active:   "p4", limit: 2,
			want: []string{"r00", "r01"},
		},
		"a rollout in flight is kept and does not count": {
			rollouts: history(past{to: "p1", phase: inflight, uid: "rt-uid"}, past{from: "", to: "p2", phase: ok}, past{from: "p2", to: "p3", phase: ok}, past{from: "p3", to: "p4", phase: ok}),
			active:   "p4", limit: 2,
			want: []string{"r01"},
		},
		"the success to the active plan and the failures since it are kept": {
			// p2 became active at r01; r02 and r03 failed from it (the stack holds what they
			// wrote); r04 was superseded.
			rollouts: history(past{to: "p1", phase: ok}, past{from: "p1", to: "p2", phase: ok},
				past{from: "p2", to: "p3", phase: failed, wrote: "a"}, past{from: "p2", to: "p4", phase: failed, wrote: "b"},
				past{from: "p2", to: "p5", phase: v1alpha1.PhaseSuperseded}, past{from: "p2", to: "p6", phase: v1alpha1.PhaseExpired}),
			active: "p2", limit: 1,
			want: []string{"r00", "r04"},
		},
		"an earlier runtime's rollouts count as ended, whatever their phase": {
			rollouts: history(past{to: "p1", phase: inflight, uid: "old"}, past{to: "p1", phase: ok}),
			active:   "p1", limit: 1,
			want: []string{"r00"},
		},
		"ordered by sequence, not by the clock or the name": {
			// Created within one second, in the order r02, r00, r01: the timestamps tie and the
			// names mislead; the sequences (resourceVersions, 99 < 100 numerically) do not.
			rollouts: history(past{to: "p1", phase: ok, seq: "100", sameTime: true}, past{from: "p1", to: "p2", phase: ok, seq: "205", sameTime: true},
				past{to: "p0", phase: ok, seq: "99", sameTime: true}),
			active: "p2", limit: 2,
			want: []string{"r02"},
		},
		"an earlier planner's rollouts, without a sequence, are older": {
			rollouts: history(past{from: "p1", to: "p2", phase: ok, seq: "7"}, past{to: "p1", phase: ok}),
			active:   "p2", limit: 1,
			want: []string{"r01"},
		},
		"a limit below one is the default": {
			rollouts: history(past{to: "p1", phase: ok}, past{from: "p1", to: "p2", phase: ok}),
			active:   "p2", limit: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Prunable(tc.rollouts, "rt-uid", tc.active, tc.limit)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("prunable (-want +got):\n%s", diff)
			}
			// Whatever goes, what the stack holds is what it was.
			active := []string{"a", "b", "c"}
			if diff := cmp.Diff(Held(active, tc.active, tc.rollouts, "rt-uid"), Held(active, tc.active, without(tc.rollouts, got), "rt-uid")); diff != "" {
				t.Errorf("pruning changed what the stack holds (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPlansInUse(t *testing.T) {
	t.Parallel()
	rs := history(past{to: "p1", phase: v1alpha1.PhaseSucceeded}, past{from: "p1", to: "p2", phase: v1alpha1.PhaseSucceeded}, past{from: "p2", to: "p3", phase: v1alpha1.PhaseSucceeded})
	keep := map[string]bool{"desired": true}
	PlansInUse(keep, rs, []*v1alpha1.RuntimeRollout{&rs[0]})
	want := map[string]bool{"desired": true, "p1": true, "p2": true, "p3": true}
	if diff := cmp.Diff(want, keep); diff != "" {
		t.Errorf("plans in use (-want +got):\n%s", diff)
	}
	keep = map[string]bool{}
	PlansInUse(keep, rs, []*v1alpha1.RuntimeRollout{&rs[0], &rs[1]})
	if diff := cmp.Diff(map[string]bool{"p2": true, "p3": true}, keep); diff != "" {
		t.Errorf("plans in use after dropping two (-want +got):\n%s", diff)
	}
}
