package appspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// The release of scenario 10 in the fixtures (testdata/ holds the recorded spec and
// managedFields): fx-web 1.0.0 with message v1 and 2 replicas into fx-drift.
var (
	driftSettings = Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "127.0.0.1:25000"}
	driftRelease  = plan.Release{
		Name: "fx-drift", Namespace: "fx-drift",
		Chart:     plan.ChartRef{Path: "charts/fx-web", Digest: "sha256:4c3db97306cbd0cad510ff970663aa0aa064d31816d84d5e6397aec4fdfb3d50"},
		DependsOn: []string{"cert-manager"},
		Values:    map[string]any{"message": "v1", "replicas": json.Number("2")},
	}
)

// desired is what the watcher renders for comparison: the engine running, whatever the live
// Application's engine-suspended annotation says.
func driftDesired(t *testing.T) *argoapp.Application {
	t.Helper()
	r := driftRelease
	app, err := Build(driftSettings, Input{
		Runtime: "cluster", RuntimeUID: "uid-1", PlanDigest: "sha256:plan", Release: &r,
		StepID: "r-1/3", StepStarted: time.Date(2026, 11, 30, 4, 45, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// recorded loads a recorded spec (or nil for the desired one) and managedFields from testdata.
func recorded(t *testing.T, specFile, fieldsFile string) option {
	t.Helper()
	return func(a *argoapp.Application) {
		if specFile != "" {
			a.Spec = argoapp.ApplicationSpec{}
			load(t, specFile, &a.Spec)
		}
		a.ManagedFields = nil
		load(t, fieldsFile, &a.ManagedFields)
	}
}

func load(t *testing.T, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
}

type option func(*argoapp.Application)

func TestDetectDrift(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		change []option
		want   Drift
	}{
		"the Application as written has no drift": {},
		"someone else's forced apply of a value: Values, owned by them": {
			// 10: someone-else applied valuesObject.message with --force-conflicts.
			change: []option{recorded(t, "10-spec-after-hand-apply.json", "10-managedFields-after-hand-apply.json")},
			want: Drift{
				Kinds:    []string{DriftValues},
				Fields:   []string{".spec.source.helm.valuesObject.message"},
				Managers: []string{"someone-else"},
			},
		},
		"kubectl patch turning automated sync off and editing a value: AutoSyncDisabled and Values": {
			change: []option{recorded(t, "", "10-managedFields-after-patches.json"), func(a *argoapp.Application) {
				no := false
				a.Spec.SyncPolicy.Automated.Enabled = &no
				a.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"message":"hand-edited-2","replicas":2}`)
			}},
			want: Drift{
				Kinds:    []string{DriftAutoSyncDisabled, DriftValues},
				Fields:   []string{".spec.source.helm.valuesObject.message", ".spec.syncPolicy.automated.enabled"},
				Managers: []string{"kubectl-patch"},
			},
		},
		"a values key added by hand is Values drift naming no manager: no field the operator applied was taken": {
			// Managers name takeovers of applied fields; the added key was nobody's before.
			change: []option{func(a *argoapp.Application) {
				a.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"message":"v1","note":"by hand","replicas":2}`)
				a.ManagedFields = []metav1.ManagedFieldsEntry{
					{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":{"f:message":{},"f:replicas":{}}}}}}`)}},
					{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":{"f:note":{}}}}}}`)}},
				}
			}},
			want: Drift{Kinds: []string{DriftValues}, Fields: []string{".spec.source.helm.valuesObject.note"}},
		},
		"edits set back by hand to the written values are no drift, though kubectl-patch still owns the fields": {
			// 10's patches undone by the same manager: the spec is as written, the ownership is not.
			change: []option{recorded(t, "", "10-managedFields-after-patches.json")},
		},
		"after the operator's forced re-apply, a field co-owned with the same value is no drift": {
			change: []option{recorded(t, "10-spec-after-operator-reapply.json", "10-managedFields-after-operator-reapply.json")},
		},
		"the controller owning status and a removed refresh annotation is no drift": {
			change: []option{recorded(t, "", "04-managedFields-after-refresh.json")},
		},
		"a hand-edited digest is Source drift": {
			change: []option{func(a *argoapp.Application) { a.Spec.Source.TargetRevision = "sha256:feed" }},
			want:   Drift{Kinds: []string{DriftSource}, Fields: []string{".spec.source.targetRevision"}},
		},
		"an added second source is Source drift": {
			change: []option{func(a *argoapp.Application) {
				a.Spec.Sources = argoapp.ApplicationSources{*a.Spec.Source.DeepCopy()}
			}},
			want: Drift{Kinds: []string{DriftSource}, Fields: []string{".spec.sources"}},
		},
		"another destination namespace is Destination drift": {
			change: []option{func(a *argoapp.Application) { a.Spec.Destination.Namespace = "elsewhere" }},
			want:   Drift{Kinds: []string{DriftDestination}, Fields: []string{".spec.destination.namespace"}},
		},
		"automated sync removed entirely is AutoSyncDisabled": {
			change: []option{func(a *argoapp.Application) { a.Spec.SyncPolicy.Automated = nil }},
			want:   Drift{Kinds: []string{DriftAutoSyncDisabled}, Fields: []string{".spec.syncPolicy.automated"}},
		},
		"automated sync off with the engine-suspended annotation is still AutoSyncDisabled: the marker is not proof": {
			// The planner knows from spec.suspendEngine whether it is drift.
			change: []option{func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationEngineSuspended] = "true"
				no := false
				a.Spec.SyncPolicy.Automated.Enabled = &no
			}},
			want: Drift{Kinds: []string{DriftAutoSyncDisabled}, Fields: []string{".spec.syncPolicy.automated.enabled"}},
		},
		"the engine-suspended annotation alone, automated sync on, changes nothing": {
			change: []option{func(a *argoapp.Application) { a.Annotations[v1alpha1.AnnotationEngineSuspended] = "true" }},
		},
		"a changed sync option is Other drift": {
			change: []option{func(a *argoapp.Application) {
				a.Spec.SyncPolicy.SyncOptions = argoapp.SyncOptions{"CreateNamespace=true"}
			}},
			want: Drift{Kinds: []string{DriftOther}, Fields: []string{".spec.syncPolicy.syncOptions"}},
		},
		"a removed ignoreDifferences entry is Other drift": {
			change: []option{func(a *argoapp.Application) { a.Spec.IgnoreDifferences = a.Spec.IgnoreDifferences[:2] }},
			want:   Drift{Kinds: []string{DriftOther}, Fields: []string{".spec.ignoreDifferences"}},
		},
		"an edited depends-on annotation and runtime label are Other drift": {
			change: []option{func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationDependsOn] = ""
				a.Labels[v1alpha1.LabelRuntime] = "other"
			}},
			want: Drift{Kinds: []string{DriftOther}, Fields: []string{".metadata.annotations." + v1alpha1.AnnotationDependsOn, ".metadata.labels." + v1alpha1.LabelRuntime}},
		},
		"the step, refresh and Argo CD annotations are not drift": {
			change: []option{func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationStep] = "r-2/1"
				a.Annotations[v1alpha1.AnnotationStepWrite] = v1alpha1.StepWriteUnchanged
				a.Annotations[v1alpha1.AnnotationRefreshFor] = "r-2/1"
				a.Annotations[v1alpha1.AnnotationArgoRefresh] = v1alpha1.ArgoRefreshNormal
			}},
		},
		"an edited plan-digest or runtime-uid annotation is Other drift": {
			change: []option{func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationPlanDigest] = "sha256:other"
				a.Annotations[v1alpha1.AnnotationRuntimeUID] = "uid-2"
			}},
			want: Drift{Kinds: []string{DriftOther}, Fields: []string{".metadata.annotations." + v1alpha1.AnnotationPlanDigest, ".metadata.annotations." + v1alpha1.AnnotationRuntimeUID}},
		},
		"a readiness-gate annotation the plan does not state, added, is Other drift": {
			change: []option{func(a *argoapp.Application) { a.Annotations[v1alpha1.AnnotationReadinessGate] = "true" }},
			want:   Drift{Kinds: []string{DriftOther}, Fields: []string{".metadata.annotations." + v1alpha1.AnnotationReadinessGate}},
		},
		"a step annotation another manager took over from the operator's apply is Other drift": {
			change: []option{func(a *argoapp.Application) {
				a.Annotations[v1alpha1.AnnotationStep] = "r-0/1"
				a.ManagedFields = append(a.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate,
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}}}`)}})
			}},
			want: Drift{Kinds: []string{DriftOther}, Fields: []string{".metadata.annotations." + v1alpha1.AnnotationStep}, Managers: []string{"kubectl-annotate"}},
		},
		"a step annotation the operator's apply still owns beside another manager is no drift": {
			change: []option{func(a *argoapp.Application) {
				a.ManagedFields = []metav1.ManagedFieldsEntry{
					{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}},"f:spec":{}}`)}},
					{Manager: "someone-else", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}}}`)}},
				}
			}},
		},
		"the Remove step's own manager owning a step annotation is no drift": {
			change: []option{func(a *argoapp.Application) {
				a.ManagedFields = append(a.ManagedFields, metav1.ManagedFieldsEntry{Manager: v1alpha1.FieldManager + "-remove", Operation: metav1.ManagedFieldsOperationApply,
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}}}`)}})
			}},
		},
		"a chart name no plan states, added to the source, is Source drift": {
			change: []option{func(a *argoapp.Application) { a.Spec.Source.Chart = "fx-web" }},
			want:   Drift{Kinds: []string{DriftSource}, Fields: []string{".spec.source.chart"}},
		},
		"the resources finalizer added by hand is FinalizerAdded": {
			change: []option{func(a *argoapp.Application) { a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer} }},
			want:   Drift{Kinds: []string{DriftFinalizerAdded}, Fields: []string{".metadata.finalizers"}},
		},
		"a delete-rollout marker Detect sees is not the operator's: Other drift": {
			// The watcher asks only about an Application whose marker no Remove step backs.
			change: []option{func(a *argoapp.Application) { a.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-9" }},
			want:   Drift{Kinds: []string{DriftOther}, Fields: []string{".metadata.annotations." + v1alpha1.AnnotationDeleteRollout}},
		},
		"a hand-set marker with the resources finalizer is both": {
			change: []option{func(a *argoapp.Application) {
				a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer}
				a.Annotations[v1alpha1.AnnotationDeleteRollout] = "r-9"
				a.Spec.Destination.Namespace = "anything"
			}},
			want: Drift{Kinds: []string{DriftDestination, DriftFinalizerAdded, DriftOther},
				Fields: []string{".metadata.annotations." + v1alpha1.AnnotationDeleteRollout, ".metadata.finalizers", ".spec.destination.namespace"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := driftDesired(t)
			live := want.DeepCopy()
			live.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
			for _, c := range tc.change {
				c(live)
			}
			got := Detect(live, want)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("drift (-want +got):\n%s", diff)
			}
		})
	}
}

// TrimManagedFields keeps what Detect reads, so a takeover of a step annotation is still seen
// on a trimmed Application, and drops the rest.
func TestTrimManagedFieldsKeepsWhatDetectReads(t *testing.T) {
	t.Parallel()
	entries := []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/plan-digest":{},"f:operator.aicr.run/refresh-for":{}},"f:labels":{"f:x":{}}},"f:spec":{"f:project":{}}}`)}},
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}},
		{Manager: v1alpha1.FieldManager + "-remove", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}},
		{Manager: ControllerManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{},"f:note":{}}},"f:status":{"f:resources":{}}}`)}},
	}
	got := TrimManagedFields(entries)
	want := []string{
		`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/plan-digest":{}}},"f:spec":{"f:project":{}}}`,
		`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}}}`,
	}
	if len(got) != len(want) || got[0].Manager != v1alpha1.FieldManager || got[1].Manager != "kubectl-annotate" {
		t.Fatalf("kept %+v, want the operator's apply and kubectl-annotate", got)
	}
	for i := range want {
		if string(got[i].FieldsV1.Raw) != want[i] {
			t.Errorf("entry %d kept %s, want %s", i, got[i].FieldsV1.Raw, want[i])
		}
	}
	live := driftDesired(t)
	live.ManagedFields = got
	if d := Detect(live, driftDesired(t)); !slices.Equal(d.Fields, []string{".metadata.annotations." + v1alpha1.AnnotationStep}) {
		t.Errorf("drift on the trimmed Application %+v, want the step annotation taken over", d)
	}
}

func TestTakenOver(t *testing.T) {
	t.Parallel()
	entry := func(manager string, op metav1.ManagedFieldsOperationType, annotation string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + annotation + `":{}}}}`)}}
	}
	ours := entry(v1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, v1alpha1.AnnotationPlanDigest)
	theirs := entry("kubectl-annotate", metav1.ManagedFieldsOperationUpdate, v1alpha1.AnnotationPlanDigest)
	tests := map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		"the operator's apply alone":                 {entries: []metav1.ManagedFieldsEntry{ours}},
		"another manager alone":                      {entries: []metav1.ManagedFieldsEntry{theirs}, want: true},
		"both":                                       {entries: []metav1.ManagedFieldsEntry{ours, theirs}},
		"another manager of another annotation":      {entries: []metav1.ManagedFieldsEntry{entry("x", metav1.ManagedFieldsOperationUpdate, v1alpha1.AnnotationStep)}},
		"the operator's own patch manager is no one": {entries: []metav1.ManagedFieldsEntry{entry(v1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, v1alpha1.AnnotationPlanDigest)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			app := &argoapp.Application{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
			if got := TakenOver(app, v1alpha1.AnnotationPlanDigest); got != tc.want {
				t.Errorf("TakenOver = %v, want %v", got, tc.want)
			}
		})
	}
}
