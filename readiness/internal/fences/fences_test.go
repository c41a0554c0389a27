package fences

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

const (
	testStep = "r-7f3a/4"
	oldStep  = "r-7f3a/1"
	newVals  = `{"message":"v2","replicas":3}`
	oldVals  = `{"message":"v1","replicas":2}`
	repo     = "oci://registry.example.com/aicr/charts/gpu-operator"
	ns       = "gpu-operator"
)

var finished = metav1.NewTime(time.Date(2026, 11, 30, 4, 43, 57, 0, time.UTC))

// option changes a test Application.
type option func(*argoapp.Application)

func source(digest, values string) argoapp.ApplicationSource {
	return argoapp.ApplicationSource{
		RepoURL: repo, Path: ".", TargetRevision: digest,
		Helm: &argoapp.ApplicationSourceHelm{ValuesObject: &runtime.RawExtension{Raw: []byte(values)}},
	}
}

// readyApp is an Application written by step testStep (step-write changed) at digestWeb2 with
// newVals that Argo CD compared after the step's refresh request (refresh-for is the step, the
// request answered), synced (automated) and found healthy: every fence passes. Options move it
// away from that.
func readyApp(opts ...option) *argoapp.Application {
	src := source(digestWeb2, newVals)
	yes := true
	app := &argoapp.Application{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu-operator", Namespace: "argocd", ResourceVersion: "42",
			Annotations: map[string]string{
				v1alpha1.AnnotationStep:       testStep,
				v1alpha1.AnnotationStepWrite:  v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: testStep,
			},
		},
		Spec: argoapp.ApplicationSpec{
			Project:     "aicr",
			Source:      src.DeepCopy(),
			Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: ns},
			SyncPolicy:  &argoapp.SyncPolicy{Automated: &argoapp.SyncPolicyAutomated{Enabled: &yes, Prune: &yes, SelfHeal: &yes}},
		},
		Status: argoapp.ApplicationStatus{
			Sync: argoapp.SyncStatus{
				Status:     argoapp.SyncStatusCodeSynced,
				Revision:   digestWeb2,
				ComparedTo: argoapp.ComparedTo{Source: *src.DeepCopy(), Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: ns}},
			},
			Health:       argoapp.AppHealthStatus{Status: "Healthy"},
			ReconciledAt: &finished,
			OperationState: &argoapp.OperationState{
				Operation:  argoapp.Operation{Sync: &argoapp.SyncOperation{Revision: digestWeb2}, InitiatedBy: argoapp.OperationInitiator{Automated: true}},
				Phase:      argoapp.OperationSucceeded,
				Message:    "successfully synced (no more tasks)",
				SyncResult: &argoapp.SyncOperationResult{Revision: digestWeb2, Source: *src.DeepCopy()},
				StartedAt:  finished,
				FinishedAt: &finished,
			},
		},
	}
	for _, o := range opts {
		o(app)
	}
	return app
}

// planned is the Plan of an Application whose spec is exactly what its plan says.
func planned(app *argoapp.Application) Plan {
	return Plan{Digest: "sha256:plan", Want: app.DeepCopy()}
}

func withAnnotation(k, v string) option {
	return func(a *argoapp.Application) { a.Annotations[k] = v }
}

func withoutAnnotation(k string) option {
	return func(a *argoapp.Application) { delete(a.Annotations, k) }
}

// comparedTo sets what Argo CD last compared (and the sync revision it reported with it).
func comparedTo(digest, values string) option {
	return func(a *argoapp.Application) {
		a.Status.Sync.ComparedTo.Source = source(digest, values)
		a.Status.Sync.Revision = digest
	}
}

func syncStatus(s argoapp.SyncStatusCode) option {
	return func(a *argoapp.Application) { a.Status.Sync.Status = s }
}

func withHealth(h string) option {
	return func(a *argoapp.Application) { a.Status.Health.Status = argoapp.HealthStatusCode(h) }
}

func phase(p argoapp.OperationPhase, msg string) option {
	return func(a *argoapp.Application) {
		a.Status.OperationState.Phase = p
		a.Status.OperationState.Message = msg
	}
}

// lastSync sets the revision and values the last sync applied.
func lastSync(digest, values string) option {
	return func(a *argoapp.Application) {
		a.Status.OperationState.SyncResult = &argoapp.SyncOperationResult{Revision: digest, Source: source(digest, values)}
		a.Status.OperationState.Operation.Sync = &argoapp.SyncOperation{Revision: digest}
	}
}

func operationRequested(by argoapp.OperationInitiator, info ...*argoapp.Info) option {
	return func(a *argoapp.Application) {
		a.Operation = &argoapp.Operation{Sync: &argoapp.SyncOperation{Revision: a.Spec.Source.TargetRevision}, InitiatedBy: by, Info: info}
	}
}

// ourOperation makes the last operation the explicit sync aicr-operator started for stepID.
func ourOperation(stepID string) option {
	return func(a *argoapp.Application) {
		a.Status.OperationState.Operation.InitiatedBy = argoapp.OperationInitiator{Username: v1alpha1.FieldManager}
		a.Status.OperationState.Operation.Info = []*argoapp.Info{{Name: appspec.StepInfoName, Value: stepID}}
	}
}

func condition(t, msg string) option {
	return func(a *argoapp.Application) {
		a.Status.Conditions = append(a.Status.Conditions, argoapp.ApplicationCondition{Type: t, Message: msg})
	}
}

var (
	gate          = withAnnotation(v1alpha1.AnnotationReadinessGate, "true")
	unchanged     = withAnnotation(v1alpha1.AnnotationStepWrite, v1alpha1.StepWriteUnchanged)
	refreshedStep = withAnnotation(v1alpha1.AnnotationRefreshFor, testStep)
	refreshSet    = withAnnotation(v1alpha1.AnnotationArgoRefresh, v1alpha1.ArgoRefreshNormal)
	aicrOperator  = argoapp.OperationInitiator{Username: v1alpha1.FieldManager}
	ourInfo       = &argoapp.Info{Name: appspec.StepInfoName, Value: testStep}
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	const (
		P = v1alpha1.FencePassed
		O = v1alpha1.FenceOpen
		F = v1alpha1.FenceFailed
	)
	type states map[string]v1alpha1.FenceState
	all := func(s v1alpha1.FenceState, overrides states) states {
		out := states{}
		for _, n := range []string{v1alpha1.FenceComparedToSpec, v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep, v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition} {
			out[n] = s
		}
		for k, v := range overrides {
			out[k] = v
		}
		return out
	}
	tests := map[string]struct {
		app *argoapp.Application
		// plan, when set, changes what the plan says (planned(app) otherwise: the spec as
		// written).
		plan func(*Plan)
		// want is each fence's state.
		want states
		// wantFailed is the verdict's Failed.
		wantFailed bool
		// fence and says: that fence's message contains says.
		fence, says string
	}{
		"a written spec that Argo CD compared, synced and found healthy is ready": {
			app:  readyApp(),
			want: all(P, nil),
		},
		"stale Synced+Healthy+Succeeded from before a values write never counts": {
			// 02: for ~0.5 s after the write the previous sync's status stays, old comparedTo.
			app:   readyApp(comparedTo(digestWeb2, oldVals), lastSync(digestWeb2, oldVals)),
			want:  all(O, states{v1alpha1.FenceNoErrorCondition: P}),
			fence: v1alpha1.FenceComparedToSpec, says: "helm.valuesObject",
		},
		"Synced at the old digest after a digest upgrade is not synced at the plan's digest": {
			app:   readyApp(comparedTo(digestWeb1, newVals), lastSync(digestWeb1, newVals)),
			want:  all(O, states{v1alpha1.FenceNoErrorCondition: P}),
			fence: v1alpha1.FenceComparedToSpec, says: "targetRevision sha256:4c3db97306cb (spec sha256:db3440cd1cf8)",
		},
		"comparedTo with the old values while the sync result already has the new ones": {
			app:   readyApp(comparedTo(digestWeb2, oldVals)),
			want:  all(P, states{v1alpha1.FenceComparedToSpec: O, v1alpha1.FenceSyncedAtRevision: O, v1alpha1.FenceHealthy: O}),
			fence: v1alpha1.FenceHealthy, says: "not judged until ComparedToSpec passes",
		},
		"comparedTo naming another destination namespace describes an earlier spec": {
			app: readyApp(func(a *argoapp.Application) {
				a.Status.Sync.ComparedTo.Destination.Namespace = "old-ns"
			}),
			want:  all(P, states{v1alpha1.FenceComparedToSpec: O, v1alpha1.FenceSyncedAtRevision: O, v1alpha1.FenceHealthy: O}),
			fence: v1alpha1.FenceComparedToSpec, says: `destination namespace "old-ns"`,
		},
		"an Application Argo CD has not compared yet (skeleton status of a new Application)": {
			app: readyApp(func(a *argoapp.Application) {
				a.Status = argoapp.ApplicationStatus{}
			}, operationRequested(argoapp.OperationInitiator{Automated: true})),
			want:  all(O, states{v1alpha1.FenceNoErrorCondition: P}),
			fence: v1alpha1.FenceComparedToSpec, says: "has not compared this Application yet",
		},
		"Healthy with a ComparisonError (a missing digest) is Failed, and health does not count": {
			// 07a: sync Unknown, health Healthy with no resources, no operation.
			app: readyApp(syncStatus(argoapp.SyncStatusCodeUnknown), condition("ComparisonError", "failed to resolve revision"), func(a *argoapp.Application) {
				a.Status.OperationState = nil
			}),
			want:       all(O, states{v1alpha1.FenceComparedToSpec: P, v1alpha1.FenceNoErrorCondition: F}),
			wantFailed: true,
			fence:      v1alpha1.FenceHealthy, says: "ComparisonError",
		},
		"Healthy while the PostSync hook still runs is not ready": {
			// 01b/02: health turns Healthy before the hook runs; .operation stays set.
			app: readyApp(phase(argoapp.OperationRunning, "waiting for completion of hook batch/Job/gpu-operator-post"),
				operationRequested(argoapp.OperationInitiator{Automated: true}), func(a *argoapp.Application) {
					a.Status.OperationState.FinishedAt = nil
				}),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "waiting for completion of hook",
		},
		"Running between retries with finishedAt set is Open with Argo CD's retry message": {
			// 08: a failed attempt keeps phase Running, sets finishedAt and says when it retries.
			app: readyApp(phase(argoapp.OperationRunning, "one or more synchronization tasks completed unsuccessfully. Retrying attempt #2 at 4:42AM."),
				operationRequested(argoapp.OperationInitiator{Automated: true})),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "Argo CD will retry: one or more synchronization tasks completed unsuccessfully. Retrying attempt #2",
		},
		"the final failed attempt of a sync of this spec is Failed even though Synced and Healthy": {
			// 08b: a failing hook leaves Synced/Healthy and no condition; only the phase shows it.
			app:        readyApp(phase(argoapp.OperationFailed, "one or more synchronization tasks completed unsuccessfully (retried 3 times).")),
			want:       all(P, states{v1alpha1.FenceSyncedAfterStep: F}),
			wantFailed: true,
			fence:      v1alpha1.FenceSyncedAfterStep, says: "retried 3 times",
		},
		"an Error phase of this spec's sync is Failed": {
			app:        readyApp(phase(argoapp.OperationError, "ComparisonError: rpc error")),
			want:       all(P, states{v1alpha1.FenceSyncedAfterStep: F}),
			wantFailed: true,
		},
		"a failed sync of an earlier spec stays Open while the written spec is OutOfSync": {
			app:   readyApp(phase(argoapp.OperationFailed, "one or more objects failed to apply"), lastSync(digestWeb2, oldVals), syncStatus(argoapp.SyncStatusCodeOutOfSync)),
			want:  all(P, states{v1alpha1.FenceSyncedAtRevision: O, v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "of an earlier spec",
		},
		"a failed sync of an earlier spec does not hold a written spec Argo CD compared as Synced": {
			app:   readyApp(phase(argoapp.OperationFailed, "one or more objects failed to apply"), lastSync(digestWeb2, oldVals)),
			want:  all(P, nil),
			fence: v1alpha1.FenceSyncedAfterStep, says: "found the cluster matching it, so there was nothing to sync",
		},
		"a final failed automated sync with SyncError and OutOfSync is Failed twice": {
			// 07b: namespace missing; retries exhausted.
			app: readyApp(syncStatus(argoapp.SyncStatusCodeOutOfSync), withHealth("Missing"),
				phase(argoapp.OperationFailed, `one or more objects failed to apply, reason: namespaces "fx-missing" not found (retried 3 times).`),
				condition("SyncError", "Failed last sync attempt")),
			want:       all(O, states{v1alpha1.FenceComparedToSpec: P, v1alpha1.FenceSyncedAfterStep: F, v1alpha1.FenceNoErrorCondition: F}),
			wantFailed: true,
		},
		"an InvalidSpecError next to an old comparedTo may be stale: Open, not Failed": {
			app:   readyApp(comparedTo(digestWeb1, newVals), condition("InvalidSpecError", "application destination is not permitted in project")),
			want:  all(O, states{v1alpha1.FenceSyncedAfterStep: P}),
			fence: v1alpha1.FenceNoErrorCondition, says: "may describe an earlier spec",
		},
		"a SyncError while a new sync is already running may still be cleared: Open": {
			app: readyApp(condition("SyncError", "Failed last sync attempt"), phase(argoapp.OperationRunning, ""),
				operationRequested(argoapp.OperationInitiator{Automated: true})),
			want: all(P, states{v1alpha1.FenceSyncedAfterStep: O, v1alpha1.FenceNoErrorCondition: O}),
		},
		"hook-only change: Synced at the new digest after its comparison, with no sync to run, passes": {
			// 06/11a: Argo CD starts no automated sync for it; the comparison after the write is
			// the reconcile that proves the step.
			app:   readyApp(lastSync(digestWeb1, newVals)),
			want:  all(P, nil),
			fence: v1alpha1.FenceSyncedAfterStep, says: "compared the written spec at sha256:db3440cd1cf8 after the step began and found the cluster matching it",
		},
		"new values that render the same manifests: compared Synced, no sync needed, passes": {
			app:  readyApp(lastSync(digestWeb2, oldVals)),
			want: all(P, nil),
		},
		"a readiness release's hook-only change still waits for its explicit sync": {
			app:   readyApp(gate, lastSync(digestWeb1, newVals)),
			want:  all(P, states{v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "a readiness release still needs its own sync",
		},
		"a comparison not yet made of the written spec proves nothing: the old Synced and sync stay Open": {
			app:   readyApp(comparedTo(digestWeb2, oldVals), lastSync(digestWeb2, oldVals)),
			want:  all(O, states{v1alpha1.FenceNoErrorCondition: P}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "waiting for Argo CD to compare or sync the written spec",
		},
		"only ignoreDifferences changed: comparedTo without them describes the spec from before the step": {
			// An engine-policy move writes the comparison exceptions alone; the old sync result
			// and Synced status match the source, so only comparedTo can tell.
			app:   readyApp(func(a *argoapp.Application) { a.Spec.IgnoreDifferences = appspec.IgnoreDifferences() }),
			want:  all(O, states{v1alpha1.FenceSyncedAfterStep: P, v1alpha1.FenceNoErrorCondition: P}),
			fence: v1alpha1.FenceComparedToSpec, says: "comparedTo differs in ignoreDifferences",
		},
		"only ignoreDifferences changed, and Argo CD compared them: ready": {
			app: readyApp(func(a *argoapp.Application) {
				a.Spec.IgnoreDifferences = appspec.IgnoreDifferences()
				a.Status.Sync.ComparedTo.IgnoreDifferences = appspec.IgnoreDifferences()
			}),
			want: all(P, nil),
		},
		"values edited by hand and synced by Argo CD are not the plan's: never judged": {
			// comparedTo, the sync and health all describe the edit.
			app: readyApp(),
			plan: func(p *Plan) {
				p.Want.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(oldVals)}
			},
			want:  all(O, nil),
			fence: v1alpha1.FenceComparedToSpec, says: "differs in helm.valuesObject (edited by hand; drift is reported); an edit is never judged, even once Argo CD synced it: undo it, or change the runtime instead; Argo CD compared the edit: Synced at sha256:db3440cd1cf8, health Healthy, its sync Succeeded",
		},
		"values edited by hand and not compared yet say so": {
			app: readyApp(comparedTo(digestWeb2, oldVals)),
			plan: func(p *Plan) {
				p.Want.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(oldVals)}
			},
			want:  all(O, nil),
			fence: v1alpha1.FenceComparedToSpec, says: "or change the runtime instead",
		},
		"a destination edited by hand is not the plan's": {
			app:   readyApp(),
			plan:  func(p *Plan) { p.Want.Spec.Destination.Namespace = "planned-ns" },
			want:  all(O, nil),
			fence: v1alpha1.FenceSyncedAtRevision, says: `not judged: the Application's spec is not what plan sha256:plan says: it differs in destination namespace "gpu-operator" on https://kubernetes.default.svc (plan namespace "planned-ns"`,
		},
		"a targetRevision edited by hand is not the plan's": {
			app:   readyApp(),
			plan:  func(p *Plan) { p.Want.Spec.Source.TargetRevision = digestWeb1 },
			want:  all(O, nil),
			fence: v1alpha1.FenceComparedToSpec, says: "targetRevision sha256:db3440cd1cf8 (plan sha256:4c3db97306cb)",
		},
		"what the plan says is not known: never judged": {
			app:   readyApp(),
			plan:  func(p *Plan) { p.Want, p.Missing = nil, "plan sha256:plan is not stored" },
			want:  all(O, nil),
			fence: v1alpha1.FenceComparedToSpec, says: "not known: plan sha256:plan is not stored",
		},
		"unchanged step after its refresh: a comparison that found Synced passes without a sync of this spec": {
			app:   readyApp(unchanged, refreshedStep, lastSync(digestWeb1, newVals)),
			want:  all(P, nil),
			fence: v1alpha1.FenceSyncedAfterStep, says: "after step r-7f3a/4's refresh",
		},
		"a sync operation requested but not started yet is Open": {
			app:   readyApp(operationRequested(argoapp.OperationInitiator{Automated: true})),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "requested and has not started",
		},
		"OutOfSync with automated sync turned off says Argo CD will not sync by itself": {
			app: readyApp(syncStatus(argoapp.SyncStatusCodeOutOfSync), func(a *argoapp.Application) {
				no := false
				a.Spec.SyncPolicy.Automated.Enabled = &no
			}),
			want:  all(P, states{v1alpha1.FenceSyncedAtRevision: O}),
			fence: v1alpha1.FenceSyncedAtRevision, says: "automated sync is off",
		},
		"Degraded health keeps Healthy open with the reason": {
			app:   readyApp(withHealth("Degraded")),
			want:  all(P, states{v1alpha1.FenceHealthy: O}),
			fence: v1alpha1.FenceHealthy, says: "Degraded",
		},
		"Progressing during a slow rollout keeps Healthy open": {
			app:  readyApp(withHealth("Progressing")),
			want: all(P, states{v1alpha1.FenceHealthy: O}),
		},
		"unchanged step with the refresh handshake complete is ready": {
			app:  readyApp(unchanged, refreshedStep),
			want: all(P, nil),
		},
		"unchanged step whose refresh annotation is still present is not ready": {
			// 04b: the annotation is visible ~40 ms until the controller removes it.
			app:   readyApp(unchanged, refreshedStep, refreshSet),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "Argo CD has not compared since",
		},
		"changed step whose written spec Argo CD compared before the step: never counts": {
			// A hand edit to the plan's new values that Argo CD compared and synced, then
			// another edit, then the step's write: comparedTo and the sync result equal the
			// written spec, from before the step. Only the step's own refresh proves "after".
			app:   readyApp(withAnnotation(v1alpha1.AnnotationRefreshFor, oldStep)),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "wrote the spec; waiting for its refresh request (" + v1alpha1.AnnotationRefreshFor + " is " + oldStep,
		},
		"changed step whose refresh request Argo CD has not answered waits": {
			app:   readyApp(refreshSet),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "wrote the spec; Argo CD has not compared since",
		},
		"unchanged step before its refresh was requested: Synced+Healthy from before the step never counts": {
			app:   readyApp(unchanged, withAnnotation(v1alpha1.AnnotationRefreshFor, oldStep)),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "refresh-for is " + oldStep,
		},
		"unchanged step of a rollout whose namesake did the refresh handshake waits for its own": {
			// A rollout of the same name created again writes the same step ID; the UID on the
			// Application is the new rollout's, the handshake the old one's (step ID alone).
			app:   readyApp(unchanged, refreshedStep, withAnnotation(v1alpha1.AnnotationStepRolloutUID, "rollout-uid-b")),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "refresh-for is " + testStep,
		},
		"unchanged step whose own rollout did the refresh handshake is ready": {
			app: readyApp(unchanged, withAnnotation(v1alpha1.AnnotationStepRolloutUID, "rollout-uid-b"),
				withAnnotation(v1alpha1.AnnotationRefreshFor, v1alpha1.StepToken(testStep, "rollout-uid-b"))),
			want: all(P, nil),
		},
		"no step annotation: nothing to judge the sync against": {
			app:  readyApp(withoutAnnotation(v1alpha1.AnnotationStep)),
			want: all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
		},
		"an unknown step-write value is Open and names the accepted values": {
			app:   readyApp(withAnnotation(v1alpha1.AnnotationStepWrite, "maybe")),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O}),
			fence: v1alpha1.FenceSyncedAfterStep, says: "expected changed or unchanged",
		},
		"multi-source Application is never ready (guard)": {
			app: readyApp(func(a *argoapp.Application) {
				a.Spec.Sources = argoapp.ApplicationSources{source(digestWeb2, newVals), source(digestWeb1, oldVals)}
			}),
			want:       all(O, states{v1alpha1.FenceComparedToSpec: F}),
			wantFailed: true,
			fence:      v1alpha1.FenceComparedToSpec, says: "spec.sources holds 2 sources",
		},
		"an Application without spec.source is never ready (guard)": {
			app:        readyApp(func(a *argoapp.Application) { a.Spec.Source = nil }),
			want:       all(O, states{v1alpha1.FenceComparedToSpec: F}),
			wantFailed: true,
			fence:      v1alpha1.FenceComparedToSpec, says: "spec.source is missing",
		},
		"an Application being deleted is not ready and not failed": {
			app:  readyApp(func(a *argoapp.Application) { a.DeletionTimestamp = &finished }),
			want: all(O, nil),
		},
		"readiness release whose sync operation succeeded is ready": {
			app:  readyApp(gate, ourOperation(testStep)),
			want: all(P, states{v1alpha1.FenceGateSynced: P}),
		},
		"readiness release with our operation Running is Open": {
			app: readyApp(gate, ourOperation(testStep), phase(argoapp.OperationRunning, "waiting for completion of hook batch/Job/gate-check"),
				operationRequested(aicrOperator, ourInfo)),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O, v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceGateSynced, says: "is running: waiting for completion of hook",
		},
		"readiness release with our operation Failed is Failed": {
			app:        readyApp(gate, ourOperation(testStep), phase(argoapp.OperationFailed, "Job has reached the specified backoff limit")),
			want:       all(P, states{v1alpha1.FenceSyncedAfterStep: F, v1alpha1.FenceGateSynced: F}),
			wantFailed: true,
			fence:      v1alpha1.FenceGateSynced, says: "ended Failed: Job has reached the specified backoff limit",
		},
		"readiness release synced only by Argo CD's automated sync waits for ours": {
			app:   readyApp(gate),
			want:  all(P, states{v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceGateSynced, says: "last operation: initiated by Argo CD's automated sync, Succeeded",
		},
		"readiness release whose succeeded operation belongs to an earlier step waits": {
			app:   readyApp(gate, ourOperation(oldStep)),
			want:  all(P, states{v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceGateSynced, says: "for step " + oldStep,
		},
		"readiness release whose succeeded operation is a namesake rollout's same step waits": {
			app: readyApp(gate, withAnnotation(v1alpha1.AnnotationStepRolloutUID, "rollout-uid-b"),
				withAnnotation(v1alpha1.AnnotationRefreshFor, v1alpha1.StepToken(testStep, "rollout-uid-b")),
				ourOperation(v1alpha1.StepToken(testStep, "rollout-uid-a"))),
			want:  all(P, states{v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceGateSynced, says: "for step " + v1alpha1.StepToken(testStep, "rollout-uid-a"),
		},
		"readiness release whose succeeded operation is its own rollout's step is ready": {
			app: readyApp(gate, withAnnotation(v1alpha1.AnnotationStepRolloutUID, "rollout-uid-b"),
				withAnnotation(v1alpha1.AnnotationRefreshFor, v1alpha1.StepToken(testStep, "rollout-uid-b")),
				ourOperation(v1alpha1.StepToken(testStep, "rollout-uid-b"))),
			want: all(P, states{v1alpha1.FenceGateSynced: P}),
		},
		"readiness release with our operation requested and not started": {
			app:   readyApp(gate, operationRequested(aicrOperator, ourInfo)),
			want:  all(P, states{v1alpha1.FenceSyncedAfterStep: O, v1alpha1.FenceGateSynced: O}),
			fence: v1alpha1.FenceGateSynced, says: "requested; Argo CD has not started it",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pl := planned(tc.app)
			if tc.plan != nil {
				tc.plan(&pl)
			}
			v := Evaluate(tc.app, pl)
			got := states{}
			for _, f := range v.Fences {
				got[f.Name] = f.State
				if f.Message == "" {
					t.Errorf("fence %s has no message", f.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fence states (-want +got):\n%s\n%s", diff, v.Summary())
			}
			wantReady := true
			for _, s := range tc.want {
				wantReady = wantReady && s == v1alpha1.FencePassed
			}
			if v.Ready != wantReady || v.Failed != tc.wantFailed {
				t.Errorf("ready=%v failed=%v, want ready=%v failed=%v", v.Ready, v.Failed, wantReady, tc.wantFailed)
			}
			if tc.fence != "" {
				f, _ := v.Fence(tc.fence)
				if !strings.Contains(f.Message, tc.says) {
					t.Errorf("%s message %q does not say %q", tc.fence, f.Message, tc.says)
				}
			}
		})
	}
}

func TestEvaluateOrderAndObserved(t *testing.T) {
	t.Parallel()
	app := readyApp(gate, ourOperation(testStep))
	v := Evaluate(app, planned(app))
	var names []string
	for _, f := range v.Fences {
		names = append(names, f.Name)
	}
	want := []string{v1alpha1.FenceComparedToSpec, v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep, v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition, v1alpha1.FenceGateSynced}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("fence order (-want +got):\n%s", diff)
	}
	if v.Observed.SyncStatus != "Synced" || v.Observed.Revision != digestWeb2 || v.Observed.Health != "Healthy" ||
		v.Observed.OperationPhase != "Succeeded" || v.Observed.ResourceVersion != "42" || v.Observed.ReconciledAt == nil {
		t.Errorf("observed = %+v", v.Observed)
	}
}

func TestEvaluateMessagesFitTheRolloutStatus(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000)
	app := readyApp(condition("SyncError", long))
	v := Evaluate(app, planned(app))
	f, _ := v.Fence(v1alpha1.FenceNoErrorCondition)
	if len(f.Message) > maxMessage {
		t.Errorf("message is %d bytes, the CRD allows %d", len(f.Message), maxMessage)
	}
	if !strings.HasSuffix(f.Message, "…") || !utf8.ValidString(f.Message) {
		t.Errorf("message not cut cleanly: %q", f.Message[len(f.Message)-10:])
	}
}

// The verdict on a hand edit says whether Argo CD has compared it yet: that is when the edit
// becomes live in the cluster, which the person who made it needs to know.
func TestEditVerdictSaysWhetherArgoCDComparedIt(t *testing.T) {
	t.Parallel()
	edited := func(opts ...option) Verdict {
		app := readyApp(opts...)
		pl := planned(app)
		pl.Want.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(oldVals)}
		return Evaluate(app, pl)
	}
	f, _ := edited().Fence(v1alpha1.FenceComparedToSpec)
	if !strings.Contains(f.Message, "Argo CD compared the edit") {
		t.Errorf("compared edit: %q does not say Argo CD compared it", f.Message)
	}
	f, _ = edited(comparedTo(digestWeb2, oldVals)).Fence(v1alpha1.FenceComparedToSpec)
	if strings.Contains(f.Message, "Argo CD compared the edit") {
		t.Errorf("edit not compared yet: %q says Argo CD compared it", f.Message)
	}
}
