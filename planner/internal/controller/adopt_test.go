package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// A planner that stopped after a rollout succeeded but before it wrote the runtime's active
// plan adopts that rollout's target on restart, even when an earlier rollout finished in the
// same second (finish times have one-second precision). Without that, the restarted planner
// recreated the succeeded rollout under the same name and waited forever for verdicts that
// readiness had already published (found by the chaos test).
func TestAdoptSucceededPrefersTheMoveFromTheActivePlan(t *testing.T) {
	second := metav1.NewTime(time.Date(2026, 11, 30, 7, 17, 30, 0, time.UTC))
	ro := func(name, from, to string, created int) v1alpha1.RuntimeRollout {
		return v1alpha1.RuntimeRollout{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(second.Add(time.Duration(created) * time.Millisecond))},
			Spec:       v1alpha1.RuntimeRolloutSpec{RuntimeUID: "uid-1", FromDigest: from, ToDigest: to},
			Status:     v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseSucceeded, FinishedAt: &second},
		}
	}
	tests := map[string]struct {
		active   string
		rollouts []v1alpha1.RuntimeRollout
		want     string
	}{
		"two rollouts finished in the same second: the one from the active plan is adopted": {
			active:   "sha256:b",
			rollouts: []v1alpha1.RuntimeRollout{ro("r-b", "sha256:a", "sha256:b", 0), ro("r-c", "sha256:b", "sha256:c", 1)},
			want:     "sha256:c",
		},
		"the same, listed the other way round": {
			active:   "sha256:b",
			rollouts: []v1alpha1.RuntimeRollout{ro("r-c", "sha256:b", "sha256:c", 1), ro("r-b", "sha256:a", "sha256:b", 0)},
			want:     "sha256:c",
		},
		"the latest rollout was recorded already: nothing moves": {
			active:   "sha256:c",
			rollouts: []v1alpha1.RuntimeRollout{ro("r-b", "sha256:a", "sha256:b", 0), ro("r-c", "sha256:b", "sha256:c", 1)},
			want:     "sha256:c",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := &view{rt: &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}, active: tc.active}
			(&Controller{}).adoptSucceeded(v, tc.rollouts)
			if v.active != tc.want {
				t.Errorf("active plan %s, want %s", v.active, tc.want)
			}
		})
	}
}
