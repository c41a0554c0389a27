package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// application is the part of an Argo CD Application the rules read: its metadata and, to tell a
// person's edit from Argo CD's own status writes, its spec as plain JSON. It keeps this module
// free of Argo CD's packages.
type application struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            any               `json:"spec,omitempty"`
}

// decodeJSON reads raw into a new T; nil when raw is empty (no object in the request).
func decodeJSON[T any](raw []byte) (*T, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// unapproved says why the operator may not write or delete an Application carrying the
// resources finalizer, named by its metadata m: it has no delete-rollout marker, or the rollout
// the marker names is not removing the release now (v1alpha1.RuntimeRollout.RemoveInProgress).
// Anyone who may edit the Application can set the marker, so it is read against the rollout.
// "" when the write is the approved Remove sequence. A rollout that cannot be read fails closed.
func (v *Validator) unapproved(ctx context.Context, release string, m metav1.ObjectMeta) string {
	marker, ok := m.Annotations[v1alpha1.AnnotationDeleteRollout]
	if !ok {
		return "without the annotation " + v1alpha1.AnnotationDeleteRollout
	}
	with := fmt.Sprintf("and the annotation %s=%s, but ", v1alpha1.AnnotationDeleteRollout, marker)
	if v.cfg.Rollouts == nil || marker == "" {
		return with + "no Remove step of a rollout can be checked for it"
	}
	r, err := v.cfg.Rollouts.GetRollout(ctx, marker)
	switch {
	case apierrors.IsNotFound(err):
		return with + "rollout " + marker + " does not exist"
	case err != nil:
		return fmt.Sprintf("%sadmission cannot read rollout %s (%v); try again", with, marker, err)
	case !r.RemoveInProgress(release):
		return with + "rollout " + marker + " is not removing " + release + " (set by hand, or its rollout ended)"
	}
	return ""
}

func (v *Validator) application(ctx context.Context, req *admissionv1.AdmissionRequest) Decision {
	if v.cfg.EngineNamespace != "" && req.Namespace != v.cfg.EngineNamespace {
		return Decision{}
	}
	obj, err := decodeJSON[application](req.Object.Raw)
	if err != nil {
		return undecodable("Application", err)
	}
	old, err := decodeJSON[application](req.OldObject.Raw)
	if err != nil {
		return undecodable("old Application", err)
	}
	var d Decision
	if v.IsOperator(req.UserInfo.Username) {
		v.applicationByOperator(ctx, &d, req, obj, old)
	} else {
		applicationByPerson(&d, req, obj, old)
	}
	return d
}

// applicationByOperator denies the operator's write to an Application that carries the
// resources finalizer unless the write is the approved Remove sequence: the object being
// written (for a deletion, the object being deleted) carries the delete-rollout marker, and the
// rollout it names is removing the release now.
func (v *Validator) applicationByOperator(ctx context.Context, d *Decision, req *admissionv1.AdmissionRequest, obj, old *application) {
	var judged *metav1.ObjectMeta
	switch req.Operation {
	case admissionv1.Delete:
		if old != nil && hasString(old.Metadata.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
			judged = &old.Metadata
		}
	case admissionv1.Create, admissionv1.Update:
		if obj != nil && (hasString(obj.Metadata.Finalizers, v1alpha1.ArgoResourcesFinalizer) ||
			(old != nil && hasString(old.Metadata.Finalizers, v1alpha1.ArgoResourcesFinalizer))) {
			judged = &obj.Metadata
		}
	}
	if judged == nil {
		return
	}
	why := v.unapproved(ctx, req.Name, *judged)
	if why == "" {
		return
	}
	d.deny(RuleApplicationFinalizer, "metadata.finalizers",
		"Application %s/%s carries the finalizer %s %s, so the operator (%s) may not write or delete it: deleting it would delete the release's resources. "+
			"Remove the finalizer to let the operator manage the Application again; to remove the component, take it out of the ClusterRuntime's plan",
		req.Namespace, req.Name, v1alpha1.ArgoResourcesFinalizer, why, req.UserInfo.Username)
}

// applicationByPerson warns someone other than the operator who creates an Application with the
// operator's managed-by label, or changes the spec of one: the operator forces it back or
// treats it as foreign. Writes that leave the spec alone (Argo CD's status and operation
// writes) are not warned about.
func applicationByPerson(d *Decision, req *admissionv1.AdmissionRequest, obj, old *application) {
	if obj == nil || obj.Metadata.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		return
	}
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		if old != nil && reflect.DeepEqual(old.Spec, obj.Spec) {
			return
		}
	default:
		return
	}
	// Kubernetes asks for warnings under 256 characters; this one is.
	d.warn(RuleApplicationManagedBy, "%s",
		fmt.Sprintf("metadata.labels[%s]=%s: the operator forces this Application's spec back, or treats it as foreign if it did not create it; change the ClusterRuntime instead",
			v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue))
}
