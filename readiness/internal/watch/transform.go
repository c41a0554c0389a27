package watch

import (
	"encoding/json"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/readiness/internal/drift"
)

// Transform trims an Application before the informer caches it to what the evaluator and drift
// detection read, so that watching 10 000 Applications stays small. It drops status.resources,
// status.history, status.summary, status.sourceHydrator, comparedTo.ignoreDifferences (never
// compared), operationState.syncResult.resources and the managedFields entries drift does not
// read: the controller's (it owns status) and the operator's own updates (refresh annotation,
// operation). The operator's apply and every other manager's entries stay, cut to their f:spec.
func Transform(obj any) (any, error) {
	app, ok := obj.(*argov1alpha1.Application)
	if !ok {
		return obj, nil // a tombstone or another type: unchanged
	}
	st := &app.Status
	st.Resources = nil
	st.History = nil
	st.Summary = argov1alpha1.ApplicationSummary{}
	st.SourceHydrator = argov1alpha1.SourceHydratorStatus{}
	st.Sync.ComparedTo.IgnoreDifferences = nil
	if os := st.OperationState; os != nil && os.SyncResult != nil {
		os.SyncResult.Resources = nil
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
