package benchargocd

import (
	"fmt"
	"maps"
	"reflect"
	"strings"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// LabelFloor marks the floor loop's Applications (its value: the run), so the operator, whose
// applier and readiness select app.kubernetes.io/managed-by=aicr-operator, leaves them alone.
const LabelFloor = "bench.aicr.run/floor"

// Ready reports whether Argo CD finished syncing app's current spec, and if not, why: the
// floor loop's readiness predicate, the same facts the operator's readiness requires of a new
// Application. Synced at the spec's revision, Healthy, no operation pending, the last operation
// Succeeded at that revision, and comparedTo equal to the spec (source with its values,
// destination, comparison exceptions).
func Ready(app *argoapp.Application) (bool, string) {
	src := app.Spec.Source
	st := &app.Status
	switch {
	case src == nil:
		return false, "spec.source is not set"
	case app.Operation != nil:
		return false, "an operation is pending"
	case st.Sync.Status != argoapp.SyncStatusCodeSynced:
		return false, fmt.Sprintf("sync status is %q, want Synced", st.Sync.Status)
	case st.Sync.Revision != src.TargetRevision:
		return false, fmt.Sprintf("synced at %q, want %q", st.Sync.Revision, src.TargetRevision)
	case st.Health.Status != argoapp.HealthStatusHealthy:
		return false, fmt.Sprintf("health is %q, want Healthy", st.Health.Status)
	case st.OperationState == nil:
		return false, "no operation has run"
	case st.OperationState.Phase != argoapp.OperationSucceeded:
		return false, fmt.Sprintf("last operation is %s, want Succeeded", st.OperationState.Phase)
	case st.OperationState.SyncResult == nil || st.OperationState.SyncResult.Revision != src.TargetRevision:
		return false, "last operation did not sync the spec's revision"
	case !appspec.EqualSource(&st.Sync.ComparedTo.Source, src):
		return false, "comparedTo.source differs from spec.source"
	case !appspec.EqualDestination(st.Sync.ComparedTo.Destination, app.Spec.Destination):
		return false, "comparedTo.destination differs from spec.destination"
	case !equalIgnores(st.Sync.ComparedTo.IgnoreDifferences, app.Spec.IgnoreDifferences):
		return false, "comparedTo.ignoreDifferences differ from the spec's"
	}
	return true, ""
}

func equalIgnores(a, b argoapp.IgnoreDifferences) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// FloorApplication turns the Application the operator would write (appspec.Build) into the
// floor loop's: the same spec, without the operator's ownership label and annotations (so the
// operator does not adopt it), labelled LabelFloor=run; a readiness gate gets the explicit sync
// the applier gives it, at creation.
func FloorApplication(built *argoapp.Application, run string) *argoapp.Application {
	app := built.DeepCopy()
	gate := app.Annotations[v1alpha1.AnnotationReadinessGate] == "true"
	maps.DeleteFunc(app.Labels, func(k, _ string) bool { return k == v1alpha1.LabelManagedBy || k == v1alpha1.LabelRuntime })
	maps.DeleteFunc(app.Annotations, func(k, _ string) bool { return strings.HasPrefix(k, v1alpha1.Group+"/") })
	if app.Labels == nil {
		app.Labels = map[string]string{}
	}
	app.Labels[LabelFloor] = run
	if gate {
		app.Operation = appspec.SyncOperation(app, "floor/"+app.Name)
	}
	return app
}
