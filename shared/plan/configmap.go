package plan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// ConfigMapName is the name of the ConfigMap that stores the plan with this digest. Plans are
// referred to by digest; the name is derived from it so a lookup is one GET.
func ConfigMapName(digest string) string {
	return "aicr-plan-" + strings.TrimPrefix(digest, "sha256:")
}

// ConfigMap renders the plan as an immutable ConfigMap in the operator namespace. It fails with
// ReasonContentTooLarge when the plan does not fit (see CheckSize).
func (p *Plan) ConfigMap(namespace string) (*corev1.ConfigMap, error) {
	if err := p.CheckSize(); err != nil {
		return nil, err
	}
	immutable := true
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ConfigMapName(p.digest),
			Namespace: namespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelRole:      v1alpha1.PlanRoleValue,
			},
			Annotations: map[string]string{
				v1alpha1.AnnotationPlanDigest: p.digest,
			},
		},
		Immutable: &immutable,
		Data:      map[string]string{v1alpha1.PlanDataKey: string(p.canonical)},
	}, nil
}

// FromConfigMap reads a plan ConfigMap and verifies that its content matches the digest in its
// annotation.
func FromConfigMap(cm *corev1.ConfigMap) (*Plan, error) {
	if cm.Labels[v1alpha1.LabelRole] != v1alpha1.PlanRoleValue {
		return nil, fmt.Errorf("read plan %s/%s: not labelled %s=%s", cm.Namespace, cm.Name, v1alpha1.LabelRole, v1alpha1.PlanRoleValue)
	}
	want := cm.Annotations[v1alpha1.AnnotationPlanDigest]
	if want == "" {
		return nil, fmt.Errorf("read plan %s/%s: annotation %s is missing", cm.Namespace, cm.Name, v1alpha1.AnnotationPlanDigest)
	}
	data, ok := cm.Data[v1alpha1.PlanDataKey]
	if !ok {
		return nil, fmt.Errorf("read plan %s/%s: key %s is missing", cm.Namespace, cm.Name, v1alpha1.PlanDataKey)
	}
	p, err := Decode([]byte(data), want)
	if err != nil {
		return nil, fmt.Errorf("read plan %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return p, nil
}
