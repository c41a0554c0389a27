// Package approval builds the spec changes of "kubectl aicr approve" and "kubectl aicr revoke":
// an approval is set once, by a person, with a reason and an expiry; a revocation needs a reason.
package approval

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// MaxReason is the longest reason accepted (the CRD's limit).
const MaxReason = 1024

// Errors a person can act on.
var (
	// ErrAlreadyApproved: an approval is set once.
	ErrAlreadyApproved = errors.New("already approved")
	// ErrNotApproved: there is nothing to revoke.
	ErrNotApproved = errors.New("not approved")
	// ErrEnded: the rollout has an outcome; approving or revoking changes nothing.
	ErrEnded = errors.New("rollout ended")
)

// Approve returns the spec patch that approves ro as user, at now, until now+expires (or the
// rollout's deadline when expires is zero).
func Approve(ro *v1alpha1.RuntimeRollout, user, reason string, expires time.Duration, now time.Time) (map[string]any, error) {
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	if expires < 0 {
		return nil, fmt.Errorf("--expires %s: use a positive duration such as 2h", expires)
	}
	if err := checkOpen(ro); err != nil {
		return nil, err
	}
	if a := ro.Spec.Approval; a != nil {
		return nil, fmt.Errorf("approve %s: %w by %s: an approval is set once (revoke it with kubectl aicr revoke, and a new rollout needs its own approval)", ro.Name, ErrAlreadyApproved, a.ApprovedBy)
	}
	approval := map[string]any{
		"approvedBy": user,
		"reason":     reason,
		"approvedAt": stamp(now),
	}
	switch {
	case expires > 0:
		at := now.Add(expires)
		if d := ro.Spec.Deadline; d != nil && at.After(d.Time) {
			return nil, fmt.Errorf("--expires %s ends after the rollout's deadline %s; use at most %s, or leave it out to expire with the rollout",
				expires, d.UTC().Format(time.RFC3339), d.Sub(now).Truncate(time.Second))
		}
		approval["expiresAt"] = stamp(at)
	case ro.Spec.Deadline != nil:
		approval["expiresAt"] = stamp(ro.Spec.Deadline.Time)
	}
	return map[string]any{"approval": approval}, nil
}

// Revoke returns the spec patch that revokes ro's approval as user, at now.
func Revoke(ro *v1alpha1.RuntimeRollout, user, reason string, now time.Time) (map[string]any, error) {
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	if err := checkOpen(ro); err != nil {
		return nil, err
	}
	a := ro.Spec.Approval
	switch {
	case a == nil:
		return nil, fmt.Errorf("revoke %s: %w: there is no approval to revoke", ro.Name, ErrNotApproved)
	case a.Revoked != nil:
		return nil, fmt.Errorf("revoke %s: %w: already revoked by %s", ro.Name, ErrNotApproved, a.Revoked.RevokedBy)
	}
	return map[string]any{"approval": map[string]any{"revoked": map[string]any{
		"revokedBy": user,
		"reason":    reason,
		"revokedAt": stamp(now),
	}}}, nil
}

func checkReason(reason string) error {
	switch r := strings.TrimSpace(reason); {
	case r == "":
		return errors.New("--reason is required: say why, in at most 1024 characters")
	case len(reason) > MaxReason:
		return fmt.Errorf("--reason is %d characters; at most %d are accepted", len(reason), MaxReason)
	}
	return nil
}

func checkOpen(ro *v1alpha1.RuntimeRollout) error {
	if ro.Status.Outcome != "" {
		return fmt.Errorf("rollout %s: %w with %s", ro.Name, ErrEnded, ro.Status.Outcome)
	}
	return nil
}

func stamp(t time.Time) string { return metav1.NewTime(t).UTC().Format(time.RFC3339) }
