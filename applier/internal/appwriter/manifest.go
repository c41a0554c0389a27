package appwriter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// manifest renders the object the applier server-side applies: the built Application with the
// step-write annotation, without status (the Application has no status subresource, so an
// applied status would overwrite Argo CD's) and without creationTimestamp. resourceVersion,
// when set, makes the apply fail with a conflict if the object changed since it was read, so the
// ownership check and the write see the same object.
func manifest(app *argoapp.Application, stepWrite, resourceVersion string) ([]byte, error) {
	raw, err := json.Marshal(app)
	if err != nil {
		return nil, fmt.Errorf("encode application %s: %w", app.Name, err)
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("encode application %s: %w", app.Name, err)
	}
	delete(obj, "status")
	delete(obj, "operation")
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return nil, fmt.Errorf("encode application %s: no metadata", app.Name)
	}
	delete(meta, "creationTimestamp")
	if stepWrite != "" {
		annotations, _ := meta["annotations"].(map[string]any)
		if annotations == nil {
			annotations = map[string]any{}
			meta["annotations"] = annotations
		}
		annotations[v1alpha1.AnnotationStepWrite] = stepWrite
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	return encodeObject(obj)
}

// removeManifest is the Remove step's apply: the delete-rollout annotation and the resources
// finalizer, owned by removeFieldManager so the operator's main apply neither drops them nor
// carries them.
func removeManifest(name, namespace, rollout, resourceVersion string) ([]byte, error) {
	meta := map[string]any{
		"name":        name,
		"namespace":   namespace,
		"annotations": map[string]any{v1alpha1.AnnotationDeleteRollout: rollout},
		"finalizers":  []any{v1alpha1.ArgoResourcesFinalizer},
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	return encodeObject(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta})
}

// releaseManifest is an apply by removeFieldManager that owns nothing: it takes back the
// delete-rollout annotation and the resources finalizer of an abandoned Remove.
func releaseManifest(name, namespace string) ([]byte, error) {
	return encodeObject(map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace}})
}

// refreshPatch is the JSON merge patch of the refresh handshake: Argo CD compares at once and
// removes argocd.argoproj.io/refresh; refresh-for tells readiness which step asked.
func refreshPatch(stepID string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
		v1alpha1.AnnotationRefreshFor:  stepID,
	}}})
}

// syncPatch is the JSON merge patch that starts an explicit sync: guarded by resourceVersion,
// and clearing status.operationState in the same write so the new operation state does not mix
// with the previous one (fixtures scenario 05b).
func syncPatch(resourceVersion string, op *argoapp.Operation) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata":  map[string]any{"resourceVersion": resourceVersion},
		"operation": op,
		"status":    map[string]any{"operationState": nil},
	})
}

const (
	apiVersion = "argoproj.io/v1alpha1"
	kind       = "Application"
)

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep Helm values' numbers exactly as written
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func encodeObject(obj map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// hasStepInfo reports whether an operation's info carries aicr-step=<stepID>.
func hasStepInfo(info []*argoapp.Info, stepID string) bool {
	return slices.ContainsFunc(info, func(i *argoapp.Info) bool {
		return i != nil && i.Name == appspec.StepInfoName && i.Value == stepID
	})
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
