package watch

import (
	"bytes"
	"encoding/json"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"

	"github.com/aicr-run/aicr-operator/readiness/internal/drift"
)

// Transform trims an Application before the informer caches it to what the evaluator and drift
// detection read, so that watching 10 000 Applications stays small. argoapp decodes no more of
// the status than readiness reads (no status.resources, history or summary); Transform drops
// the managedFields entries drift does not read: the controller's (it owns status) and the
// operator's own updates (refresh annotation, operation). The operator's apply and every other
// manager's entries stay, cut to their f:spec. And the Helm values Argo CD copies from the spec
// into status.sync.comparedTo and operationState (syncResult, operation), and the comparison
// exceptions it copies into comparedTo, are kept once: a copy equal to the spec's shares the
// spec's.
func Transform(obj any) (any, error) {
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return obj, nil // a tombstone or another type: unchanged
	}
	if src := app.Spec.Source; src != nil && src.Helm != nil && src.Helm.ValuesObject != nil {
		values := src.Helm.ValuesObject
		shareValues(&app.Status.Sync.ComparedTo.Source, values)
		if os := app.Status.OperationState; os != nil {
			if os.SyncResult != nil {
				shareValues(&os.SyncResult.Source, values)
			}
			if os.Operation.Sync != nil {
				shareValues(os.Operation.Sync.Source, values)
			}
		}
	}
	if ct := &app.Status.Sync.ComparedTo; len(ct.IgnoreDifferences) > 0 && reflect.DeepEqual(ct.IgnoreDifferences, app.Spec.IgnoreDifferences) {
		ct.IgnoreDifferences = app.Spec.IgnoreDifferences
	}
	if len(app.ManagedFields) > 0 {
		// A new slice: reusing the old one would keep the dropped entries reachable.
		var kept []metav1.ManagedFieldsEntry
		for _, e := range app.ManagedFields {
			switch {
			case e.Manager == drift.ControllerManager:
			case e.Manager == v1alpha1.FieldManager && e.Operation != metav1.ManagedFieldsOperationApply:
			default:
				e.FieldsV1 = specFields(e.FieldsV1)
				kept = append(kept, e)
			}
		}
		app.ManagedFields = kept
	}
	return app, nil
}

// shareValues points src's Helm values at values when they are the same bytes.
func shareValues(src *argoapp.ApplicationSource, values *runtime.RawExtension) {
	if src == nil || src.Helm == nil || src.Helm.ValuesObject == nil {
		return
	}
	if bytes.Equal(src.Helm.ValuesObject.Raw, values.Raw) {
		src.Helm.ValuesObject = values
	}
}

// specFields keeps only the f:spec part of a field set: drift reads nothing else, and a
// manager that created the Application with its status would otherwise keep every
// status.resources entry alive in the cache.
func specFields(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil {
		return nil
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(f.Raw, &set); err != nil {
		return f
	}
	spec, ok := set["f:spec"]
	if !ok {
		return &metav1.FieldsV1{Raw: []byte("{}")}
	}
	raw, err := json.Marshal(map[string]json.RawMessage{"f:spec": spec})
	if err != nil {
		return f
	}
	return &metav1.FieldsV1{Raw: raw}
}
