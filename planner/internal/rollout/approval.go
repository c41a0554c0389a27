package rollout

import (
	"fmt"
	"slices"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// ApprovalState is what an approval allows now.
type ApprovalState int

// Approval states.
const (
	// ApprovalMissing: nobody approved (or only the operator's own identity did, which is
	// ignored).
	ApprovalMissing ApprovalState = iota
	// ApprovalValid: a person approved, it has not expired and is not revoked.
	ApprovalValid
	// ApprovalExpired: the approval's expiry (default: the rollout's deadline) has passed.
	ApprovalExpired
	// ApprovalRevoked: a person withdrew the approval; the rollout ends RolloutRevoked.
	ApprovalRevoked
)

// Approval is the evaluation of a rollout's approval.
type Approval struct {
	// State is what the approval allows.
	State ApprovalState
	// Message says why, for a person.
	Message string
	// ExpiresAt is when a valid approval stops counting (zero when it never does).
	ExpiresAt time.Time
}

// EvaluateApproval judges a rollout's approval at now. An approval whose approvedBy is one of
// identities (the operator's own) is ignored altogether, revocation included: the operator can
// neither consent for a person nor withdraw a person's consent.
func EvaluateApproval(r *v1alpha1.RuntimeRollout, identities []string, now time.Time) Approval {
	a := r.Spec.Approval
	if a == nil {
		return Approval{State: ApprovalMissing, Message: fmt.Sprintf("waiting for an approval: kubectl aicr approve %s --reason TEXT", r.Name)}
	}
	if slices.Contains(identities, a.ApprovedBy) {
		return Approval{State: ApprovalMissing, Message: fmt.Sprintf(
			"the approval by %s is ignored: it is one of the operator's own identities; a person must approve with kubectl aicr approve %s --reason TEXT", a.ApprovedBy, r.Name)}
	}
	if a.Revoked != nil {
		return Approval{State: ApprovalRevoked, Message: fmt.Sprintf("approval by %s was revoked by %s: %s", a.ApprovedBy, a.Revoked.RevokedBy, a.Revoked.Reason)}
	}
	var expires time.Time
	switch {
	case a.ExpiresAt != nil:
		expires = a.ExpiresAt.Time
	case r.Spec.Deadline != nil:
		expires = r.Spec.Deadline.Time
	}
	if !expires.IsZero() && !now.Before(expires) {
		return Approval{State: ApprovalExpired, ExpiresAt: expires, Message: fmt.Sprintf(
			"the approval by %s expired at %s; approve again with kubectl aicr approve %s --reason TEXT --expires DURATION",
			a.ApprovedBy, expires.UTC().Format(time.RFC3339), r.Name)}
	}
	return Approval{State: ApprovalValid, ExpiresAt: expires, Message: fmt.Sprintf("approved by %s: %s", a.ApprovedBy, a.Reason)}
}
