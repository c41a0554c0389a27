package rules

import (
	"strings"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// MaxReasonLength bounds an approval's and a revocation's reason, in characters.
const MaxReasonLength = 1024

// rollout guards spec.approval: set once by a person in their own name, never by the operator;
// a revocation is set once, in the revoker's own name, with a reason.
func (v *Validator) rollout(req *admissionv1.AdmissionRequest) Decision {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return Decision{}
	}
	obj, err := decodeJSON[v1alpha1.RuntimeRollout](req.Object.Raw)
	if err != nil {
		return undecodable("RuntimeRollout", err)
	}
	old, err := decodeJSON[v1alpha1.RuntimeRollout](req.OldObject.Raw)
	if err != nil {
		return undecodable("old RuntimeRollout", err)
	}
	if obj == nil {
		return undecodable("RuntimeRollout", errMissingObject)
	}
	var was *v1alpha1.Approval
	if old != nil {
		was = old.Spec.Approval
	}
	now := obj.Spec.Approval
	var d Decision
	user := req.UserInfo.Username
	if v.IsOperator(user) {
		if !equality.Semantic.DeepEqual(was, now) {
			d.deny(RuleRolloutApproval, "spec.approval",
				"the operator (%s) may never set, change or revoke an approval; a person approves with kubectl aicr approve and revokes with kubectl aicr revoke", user)
		}
		return d
	}
	switch {
	case was == nil && now == nil:
	case was == nil:
		v.checkNewApproval(&d, user, now)
	case now == nil:
		d.deny(RuleRolloutApproval, "spec.approval",
			"an approval cannot be removed once set; revoke it instead with kubectl aicr revoke ROLLOUT --reason TEXT")
	default:
		setOnce(&d, "spec.approval.approvedBy", was.ApprovedBy == now.ApprovedBy)
		setOnce(&d, "spec.approval.reason", was.Reason == now.Reason)
		setOnce(&d, "spec.approval.approvedAt", equalTime(was.ApprovedAt, now.ApprovedAt))
		setOnce(&d, "spec.approval.expiresAt", equalTime(was.ExpiresAt, now.ExpiresAt))
		switch {
		case was.Revoked == nil && now.Revoked != nil:
			checkRevocation(&d, user, now.Revoked)
		case !equality.Semantic.DeepEqual(was.Revoked, now.Revoked):
			d.deny(RuleRolloutApproval, "spec.approval.revoked",
				"a revocation is set once and cannot be changed or removed")
		}
	}
	return d
}

func setOnce(d *Decision, field string, same bool) {
	if !same {
		d.deny(RuleRolloutApproval, field,
			"cannot change once the approval is set; revoke the approval instead (kubectl aicr revoke ROLLOUT --reason TEXT)")
	}
}

func equalTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(b)
}

func (v *Validator) checkNewApproval(d *Decision, user string, a *v1alpha1.Approval) {
	checkOwnName(d, "spec.approval.approvedBy", user, a.ApprovedBy)
	checkReason(d, "spec.approval.reason", a.Reason, "an approval needs a reason: say why the rollout's Remove steps may run")
	if a.ExpiresAt != nil {
		now := v.cfg.Clock.Now()
		if a.ExpiresAt.Time.Before(now) {
			d.deny(RuleRolloutApproval, "spec.approval.expiresAt",
				"%s is in the past (now %s); set a later time, or leave it empty to use the rollout's deadline",
				a.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
	}
	if a.Revoked != nil {
		checkRevocation(d, user, a.Revoked)
	}
}

func checkRevocation(d *Decision, user string, r *v1alpha1.Revocation) {
	checkOwnName(d, "spec.approval.revoked.revokedBy", user, r.RevokedBy)
	checkReason(d, "spec.approval.revoked.reason", r.Reason, "a revocation needs a reason: say why the approval is withdrawn")
}

// checkOwnName requires a name field to be the requester's own username. A validating webhook
// cannot fill it in, so it says what to write.
func checkOwnName(d *Decision, field, user, got string) {
	if got != user {
		d.deny(RuleRolloutApproval, field,
			"must be your own username %q (got %q): nobody approves or revokes in another's name, and admission cannot fill it in for you", user, got)
	}
}

func checkReason(d *Decision, field, reason, missing string) {
	switch n := utf8.RuneCountInString(reason); {
	case strings.TrimSpace(reason) == "":
		d.deny(RuleRolloutApproval, field, "%s", missing)
	case n > MaxReasonLength:
		d.deny(RuleRolloutApproval, field, "is %d characters; at most %d are accepted", n, MaxReasonLength)
	}
}
