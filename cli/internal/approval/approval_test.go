package approval

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

var now = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func rollout(mut ...func(*v1alpha1.RuntimeRollout)) *v1alpha1.RuntimeRollout {
	deadline := metav1.NewTime(now.Add(6 * time.Hour))
	ro := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Spec: v1alpha1.RuntimeRolloutSpec{Deadline: &deadline}}
	for _, m := range mut {
		m(ro)
	}
	return ro
}

func TestApprove(t *testing.T) {
	for name, tc := range map[string]struct {
		ro      *v1alpha1.RuntimeRollout
		reason  string
		expires time.Duration
		want    map[string]any
		wantErr string
	}{
		"without --expires the approval lasts until the rollout's deadline": {
			ro: rollout(), reason: "remove the old exporter",
			want: map[string]any{"approval": map[string]any{"approvedBy": "alice", "reason": "remove the old exporter",
				"approvedAt": "2026-03-04T10:00:00Z", "expiresAt": "2026-03-04T16:00:00Z"}},
		},
		"--expires sets the expiry from now": {
			ro: rollout(), reason: "r", expires: 90 * time.Minute,
			want: map[string]any{"approval": map[string]any{"approvedBy": "alice", "reason": "r",
				"approvedAt": "2026-03-04T10:00:00Z", "expiresAt": "2026-03-04T11:30:00Z"}},
		},
		"a rollout without a deadline gets no expiry": {
			ro: rollout(func(ro *v1alpha1.RuntimeRollout) { ro.Spec.Deadline = nil }), reason: "r",
			want: map[string]any{"approval": map[string]any{"approvedBy": "alice", "reason": "r", "approvedAt": "2026-03-04T10:00:00Z"}},
		},
		"an expiry past the deadline is refused, saying the most allowed": {
			ro: rollout(), reason: "r", expires: 7 * time.Hour, wantErr: "use at most 6h0m0s",
		},
		"a reason is required": {ro: rollout(), reason: "  ", wantErr: "--reason is required"},
		"a reason is at most 1024 characters": {
			ro: rollout(), reason: strings.Repeat("x", 1025), wantErr: "at most 1024",
		},
		"an approval is set once": {
			ro: rollout(func(ro *v1alpha1.RuntimeRollout) {
				ro.Spec.Approval = &v1alpha1.Approval{ApprovedBy: "bob", Reason: "x"}
			}), reason: "r", wantErr: "already approved by bob",
		},
		"an ended rollout is not approved": {
			ro:     rollout(func(ro *v1alpha1.RuntimeRollout) { ro.Status.Outcome = v1alpha1.OutcomeFailed }),
			reason: "r", wantErr: "rollout ended with RolloutFailed",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Approve(tc.ro, "alice", tc.reason, tc.expires, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevoke(t *testing.T) {
	approved := func(ro *v1alpha1.RuntimeRollout) {
		ro.Spec.Approval = &v1alpha1.Approval{ApprovedBy: "bob", Reason: "x"}
	}
	for name, tc := range map[string]struct {
		ro      *v1alpha1.RuntimeRollout
		reason  string
		want    map[string]any
		wantErr error
	}{
		"an approval is revoked with who, why and when": {
			ro: rollout(approved), reason: "wrong cluster",
			want: map[string]any{"approval": map[string]any{"revoked": map[string]any{
				"revokedBy": "alice", "reason": "wrong cluster", "revokedAt": "2026-03-04T10:00:00Z"}}},
		},
		"nothing to revoke": {ro: rollout(), reason: "r", wantErr: ErrNotApproved},
		"revoked once": {
			ro: rollout(approved, func(ro *v1alpha1.RuntimeRollout) {
				ro.Spec.Approval.Revoked = &v1alpha1.Revocation{RevokedBy: "carol", Reason: "x"}
			}), reason: "r", wantErr: ErrNotApproved,
		},
		"an ended rollout": {
			ro: rollout(approved, func(ro *v1alpha1.RuntimeRollout) { ro.Status.Outcome = v1alpha1.OutcomeSucceeded }), reason: "r", wantErr: ErrEnded,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Revoke(tc.ro, "alice", tc.reason, now)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Revoke(rollout(approved), "alice", "", now); err == nil {
		t.Error("a revocation without a reason was accepted")
	}
}
