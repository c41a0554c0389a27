package appwriter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
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
	// UID, when set, holds the write to the object read: a patch that carries it fails with a
	// conflict when no object has the name (it never creates one) and as invalid when another
	// object stands under it (isUIDMismatch).
	UID types.UID `json:"uid,omitempty"`
	// ResourceVersion, when set, makes the apply fail with a conflict if the object changed
	// since it was read, so the ownership check and the write see the same object.
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	Finalizers      []string          `json:"finalizers,omitempty"`
}

var applicationType = metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"}

// guard is what a write to an existing Application is held to: the UID of the object read
// (always), and its resourceVersion where the write must see the same state as the read.
type guard struct {
	uid             types.UID
	resourceVersion string
}

// guardOf holds a write to app as read: its UID and resourceVersion.
func guardOf(app *argoapp.Application) guard {
	return guard{uid: app.UID, resourceVersion: app.ResourceVersion}
}

// uidOnly holds a write to app's UID alone: the write is right whatever else changed since.
func uidOnly(app *argoapp.Application) guard { return guard{uid: app.UID} }

// manifest renders the operator's apply of app, the built Application: its labels,
// annotations (with the step-write annotation when stepWrite is set) and spec, held to g (the
// zero guard for the body of a create). The resources finalizer is never part of it: the
// Remove's own field manager owns that.
func manifest(app *argoapp.Application, stepWrite string, g guard) ([]byte, error) {
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
		Metadata: appliedMeta{Name: app.Name, Namespace: app.Namespace, UID: g.uid, ResourceVersion: g.resourceVersion,
			Labels: app.Labels, Annotations: annotations},
		Spec: &spec,
	})
}

// removeManifest is the Remove step's apply: the delete-rollout annotation and the resources
// finalizer, owned by RemoveFieldManager so the operator's main apply neither drops them nor
// carries them.
func removeManifest(name, namespace, rollout string, g guard) ([]byte, error) {
	return encode(&appliedApplication{TypeMeta: applicationType, Metadata: appliedMeta{
		Name: name, Namespace: namespace, UID: g.uid, ResourceVersion: g.resourceVersion,
		Annotations: map[string]string{v1alpha1.AnnotationDeleteRollout: rollout},
		Finalizers:  []string{v1alpha1.ArgoResourcesFinalizer},
	}})
}

// releaseManifest is an apply by RemoveFieldManager that owns nothing: it takes back the
// delete-rollout annotation and the resources finalizer of an abandoned Remove, of the object g
// names.
func releaseManifest(name, namespace string, g guard) ([]byte, error) {
	return encode(&appliedApplication{TypeMeta: applicationType, Metadata: appliedMeta{Name: name, Namespace: namespace,
		UID: g.uid, ResourceVersion: g.resourceVersion}})
}

// unmarkPatch is the JSON merge patch that removes a delete-rollout annotation someone else set,
// held to g.
func unmarkPatch(g guard) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": guardMeta(g, map[string]any{
		"annotations": map[string]any{v1alpha1.AnnotationDeleteRollout: nil},
	})})
}

// guardMeta adds g's preconditions to a merge patch's metadata.
func guardMeta(g guard, meta map[string]any) map[string]any {
	if g.uid != "" {
		meta["uid"] = g.uid
	}
	if g.resourceVersion != "" {
		meta["resourceVersion"] = g.resourceVersion
	}
	return meta
}

// refreshPatch is the JSON merge patch of the refresh handshake: Argo CD compares at once and
// removes argocd.argoproj.io/refresh; refresh-for tells readiness which step of which rollout
// asked (a v1alpha1.StepToken). It is held to g (the UID: the refresh is asked of the object
// written, whatever Argo CD wrote since).
func refreshPatch(token string, g guard) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": guardMeta(g, map[string]any{"annotations": map[string]any{
		v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
		v1alpha1.AnnotationRefreshFor:  token,
	}})})
}

// syncPatch is the JSON merge patch that starts an explicit sync: guarded by resourceVersion,
// and clearing status.operationState in the same write so the new operation state does not mix
// with the previous one (scenario 05b of the recorded Argo CD fixtures in
// readiness/internal/fences/testdata).
func syncPatch(g guard, op *argoapp.Operation) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata":  guardMeta(g, map[string]any{}),
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

// unstatedPatch is the JSON merge patch, held to g, that removes what the live Application
// holds and the operator's apply does not state, so a repair leaves the Application exactly as
// the plan says: every key of the spec that desired lacks, at any depth of maps (an added
// spec.sources, source.chart, a values key someone added), and every plan-decided annotation
// (appspec.PlanDecidedAnnotations) that desired lacks. After the forced apply every field
// desired states has its value, so what is left is only such additions, owned by another
// manager (an apply does not remove a field it never owned). Lists are atomic in the
// Application's schema: the apply replaced each one it states. ok is false when there is
// nothing to remove.
func unstatedPatch(live, desired *argoapp.Application, stepWrite string, g guard) (patch []byte, ok bool, err error) {
	wantSpec, err := decoded(desired.Spec)
	if err != nil {
		return nil, false, err
	}
	gotSpec, err := decoded(live.Spec)
	if err != nil {
		return nil, false, err
	}
	meta := map[string]any{}
	spec, _ := removals(wantSpec, gotSpec).(map[string]any)
	annotations := map[string]any{}
	for _, k := range appspec.PlanDecidedAnnotations {
		_, stated := desired.Annotations[k]
		if k == v1alpha1.AnnotationStepWrite {
			stated = stepWrite != ""
		}
		if _, held := live.Annotations[k]; held && !stated {
			annotations[k] = nil
		}
	}
	if len(spec) == 0 && len(annotations) == 0 {
		return nil, false, nil
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	body := map[string]any{"metadata": guardMeta(g, meta)}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	patch, err = json.Marshal(body)
	return patch, err == nil, err
}

// removals is the merge patch that removes from got the keys of maps want lacks: null for each,
// recursing into maps both hold; nil when there is nothing to remove.
func removals(want, got any) any {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if !wok || !gok {
		return nil
	}
	out := map[string]any{}
	for k, gv := range gm {
		wv, stated := wm[k]
		if !stated {
			out[k] = nil
			continue
		}
		if r := removals(wv, gv); r != nil {
			out[k] = r
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// decoded is v as generic JSON.
func decoded(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode application spec: %w", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode application spec: %w", err)
	}
	return out, nil
}
