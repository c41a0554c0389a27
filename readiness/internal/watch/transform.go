package watch

import (
	"bytes"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// Transform trims an Application before the informer caches it to what the evaluator and drift
// detection read, so that watching 10 000 Applications stays small. argoapp decodes no more of
// the status than readiness reads (no status.resources, history or summary); Transform drops
// the managedFields entries drift does not read: the controller's (it owns status) and the
// operator's own updates (refresh annotation, operation). The operator's apply and every other
// manager's entries stay, cut to their f:spec and plan-decided annotations
// (appspec.TrimManagedFields). And the Helm values Argo CD copies from the spec
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
	app.ManagedFields = appspec.TrimManagedFields(app.ManagedFields)
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
