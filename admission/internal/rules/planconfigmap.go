package rules

import (
	"bytes"
	"fmt"
	"maps"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// isPlan reports whether a ConfigMap is a plan (label operator.aicr.run/role=plan).
func isPlan(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Labels[v1alpha1.LabelRole] == v1alpha1.PlanRoleValue
}

// planConfigMap keeps plans immutable: rollouts, Applications and status refer to a plan by its
// digest, so a plan whose content or identity changed would misstate what was rolled out. A
// new plan's content must match its digest. Only the operator deletes plans.
func (v *Validator) planConfigMap(req *admissionv1.AdmissionRequest) Decision {
	obj, err := decodeJSON[corev1.ConfigMap](req.Object.Raw)
	if err != nil {
		return undecodable("ConfigMap", err)
	}
	old, err := decodeJSON[corev1.ConfigMap](req.OldObject.Raw)
	if err != nil {
		return undecodable("old ConfigMap", err)
	}
	var d Decision
	switch req.Operation {
	case admissionv1.Delete:
		if isPlan(old) && !v.IsOperator(req.UserInfo.Username) {
			d.deny(RulePlanDelete, "",
				"plan ConfigMap %s/%s (plan %s) may be deleted only by the operator, which knows when no runtime or rollout refers to it any more; %s may not delete it",
				req.Namespace, req.Name, old.Annotations[v1alpha1.AnnotationPlanDigest], who(req))
		}
	case admissionv1.Update:
		if isPlan(old) {
			checkPlanUnchanged(&d, old, obj)
		} else if isPlan(obj) {
			checkPlanContent(&d, obj)
		}
	case admissionv1.Create:
		if isPlan(obj) {
			checkPlanContent(&d, obj)
		}
	}
	return d
}

func checkPlanUnchanged(d *Decision, old, obj *corev1.ConfigMap) {
	if obj == nil {
		return
	}
	immutable := func(field string) {
		d.deny(RulePlanImmutable, field,
			"cannot change: plan %s is immutable, because rollouts and Applications refer to it by digest; change the ClusterRuntime and the operator writes a new plan",
			old.Annotations[v1alpha1.AnnotationPlanDigest])
	}
	if !maps.Equal(old.Data, obj.Data) {
		immutable("data")
	}
	if !maps.EqualFunc(old.BinaryData, obj.BinaryData, bytes.Equal) {
		immutable("binaryData")
	}
	if old.Labels[v1alpha1.LabelRole] != obj.Labels[v1alpha1.LabelRole] {
		immutable(fmt.Sprintf("metadata.labels[%s]", v1alpha1.LabelRole))
	}
	if old.Annotations[v1alpha1.AnnotationPlanDigest] != obj.Annotations[v1alpha1.AnnotationPlanDigest] {
		immutable(fmt.Sprintf("metadata.annotations[%s]", v1alpha1.AnnotationPlanDigest))
	}
}

// checkPlanContent requires a new plan's content to match the digest it claims, the check every
// reader of a plan makes (plan.FromConfigMap), so no reader ever meets a plan it must refuse.
func checkPlanContent(d *Decision, cm *corev1.ConfigMap) {
	if _, err := plan.FromConfigMap(cm); err != nil {
		d.deny(RulePlanImmutable, fmt.Sprintf("metadata.annotations[%s]", v1alpha1.AnnotationPlanDigest),
			"%v; a plan ConfigMap's %s must be the plan whose digest it is named by (the operator writes plans; nobody else needs to)",
			err, v1alpha1.PlanDataKey)
	}
}
