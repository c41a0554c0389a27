package appwriter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// appliedApplication is an Application as the applier server-side applies it: what the
// operator owns, typed. A field in an apply body is a field its manager owns, so nothing here is
// stated at its zero value (every optional field is omitempty or a pointer): there is no status
// (the Application has no status subresource, so an applied status would overwrite Argo CD's),
// no operation (an explicit sync is a merge patch), and the metadata states neither
// creationTimestamp nor managedFields.
type appliedApplication struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        appliedMeta `json:"metadata"`
	// Spec is the whole desired spec; nil in the removal applies, which own metadata only.
	Spec *argoapp.ApplicationSpec `json:"spec,omitempty"`
}

// appliedMeta is the metadata of an appliedApplication.
type appliedMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// ResourceVersion, when set, makes the apply fail with a conflict if the object changed
	// since it was read, so the ownership check and the write see the same object.
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	Finalizers      []string          `json:"finalizers,omitempty"`
}

var applicationType = metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"}

// manifest renders the operator's apply of app, the built Application: its labels,
// annotations (with the step-write annotation when stepWrite is set) and spec, under
// resourceVersion when set. The resources finalizer is never part of it: the Remove's own field
// manager owns that.
func manifest(app *argoapp.Application, stepWrite, resourceVersion string) ([]byte, error) {
	annotations := maps.Clone(app.Annotations)
	if stepWrite != "" {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1alpha1.AnnotationStepWrite] = stepWrite
	}
	spec := app.Spec
	return encode(&appliedApplication{
		TypeMeta: applicationType,
		Metadata: appliedMeta{Name: app.Name, Namespace: app.Namespace, ResourceVersion: resourceVersion,
			Labels: app.Labels, Annotations: annotations},
		Spec: &spec,
	})
}

// removeManifest is the Remove step's apply: the delete-rollout annotation and the resources
// finalizer, owned by RemoveFieldManager so the operator's main apply neither drops them nor
// carries them.
func removeManifest(name, namespace, rollout, resourceVersion string) ([]byte, error) {
	return encode(&appliedApplication{TypeMeta: applicationType, Metadata: appliedMeta{
		Name: name, Namespace: namespace, ResourceVersion: resourceVersion,
		Annotations: map[string]string{v1alpha1.AnnotationDeleteRollout: rollout},
		Finalizers:  []string{v1alpha1.ArgoResourcesFinalizer},
	}})
}

// releaseManifest is an apply by RemoveFieldManager that owns nothing: it takes back the
// delete-rollout annotation and the resources finalizer of an abandoned Remove.
func releaseManifest(name, namespace string) ([]byte, error) {
	return encode(&appliedApplication{TypeMeta: applicationType, Metadata: appliedMeta{Name: name, Namespace: namespace}})
}

// unmarkPatch is the JSON merge patch that removes a delete-rollout annotation someone else set,
// guarded by resourceVersion.
func unmarkPatch(resourceVersion string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": resourceVersion,
		"annotations":     map[string]any{v1alpha1.AnnotationDeleteRollout: nil},
	}})
}

// refreshPatch is the JSON merge patch of the refresh handshake: Argo CD compares at once and
// removes argocd.argoproj.io/refresh; refresh-for tells readiness which step of which rollout
// asked (a v1alpha1.StepToken).
func refreshPatch(token string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
		v1alpha1.AnnotationRefreshFor:  token,
	}}})
}

// syncPatch is the JSON merge patch that starts an explicit sync: guarded by resourceVersion,
// and clearing status.operationState in the same write so the new operation state does not mix
// with the previous one (scenario 05b of the recorded Argo CD fixtures in
// readiness/internal/fences/testdata).
func syncPatch(resourceVersion string, op *argoapp.Operation) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata":  map[string]any{"resourceVersion": resourceVersion},
		"operation": op,
		"status":    map[string]any{"operationState": nil},
	})
}

// encode renders an apply body: compact JSON, Helm values' numbers as written, no HTML
// escaping (values are passed through as they are).
func encode(obj *appliedApplication) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encode manifest of application %s: %w", obj.Metadata.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ownerEvidence says why app is not owned by the runtime with runtimeUID; "" when it is.
func ownerEvidence(app *argoapp.Application, runtimeUID string) string {
	var why []string
	switch got, ok := app.Labels[v1alpha1.LabelManagedBy]; {
	case !ok:
		why = append(why, fmt.Sprintf("label %s is missing (want %q)", v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue))
	case got != v1alpha1.ManagedByValue:
		why = append(why, fmt.Sprintf("label %s is %q (want %q)", v1alpha1.LabelManagedBy, got, v1alpha1.ManagedByValue))
	}
	switch got, ok := app.Annotations[v1alpha1.AnnotationRuntimeUID]; {
	case !ok:
		why = append(why, fmt.Sprintf("annotation %s is missing (want %q)", v1alpha1.AnnotationRuntimeUID, runtimeUID))
	case got != runtimeUID:
		why = append(why, fmt.Sprintf("annotation %s is %q (want %q)", v1alpha1.AnnotationRuntimeUID, got, runtimeUID))
	}
	return strings.Join(why, "; ")
}
