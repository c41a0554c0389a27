package watch

import (
	"reflect"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// Transform trims an Application before the informer caches it to what the evaluator and drift
// detection read, so that watching 10 000 Applications stays small. argoapp decodes no more of
// the status than readiness reads (no status.resources, history or summary); Transform drops
// the managedFields entries drift does not read: the controller's (it owns status) and the
// operator's own updates (refresh annotation, operation). The operator's apply and every other
// manager's entries stay, cut to their f:spec and plan-decided annotations
// (appspec.TrimManagedFields), with the Helm values' keys cut from them. The Helm values of the
// spec, and the copies Argo CD makes of them in status.sync.comparedTo and operationState
// (syncResult, operation), are kept as digests (values.go: digestValues); the comparison
// exceptions Argo CD copies into comparedTo are kept once: a copy equal to the spec's shares
// the spec's.
func Transform(obj any) (any, error) {
	app, ok := obj.(*argoapp.Application)
	if !ok {
		return obj, nil // a tombstone or another type: unchanged
	}
	if ct := &app.Status.Sync.ComparedTo; len(ct.IgnoreDifferences) > 0 && reflect.DeepEqual(ct.IgnoreDifferences, app.Spec.IgnoreDifferences) {
		ct.IgnoreDifferences = app.Spec.IgnoreDifferences
	}
	app.ManagedFields = appspec.TrimManagedFields(app.ManagedFields)
	digestValues(app)
	return app, nil
}
