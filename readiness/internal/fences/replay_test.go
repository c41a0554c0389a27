package fences

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// The sequences in testdata/ were recorded from a real Argo CD v3.4.2 (testdata/README.md says
// how, and what each scenario showed). Each snapshot carries status, annotations
// and .operation, but no spec: the spec of the replay is the README's "Application shape used"
// with the chart, digest, values and namespace the events file says were written.

// Chart digests of the fixture charts (README, "Charts").
const (
	digestWeb1   = "sha256:4c3db97306cbd0cad510ff970663aa0aa064d31816d84d5e6397aec4fdfb3d50"
	digestWeb2   = "sha256:db3440cd1cf81965a768c454a0dd5323fff8a29d663559ceee99e219f32f11a4"
	digestWeb3   = "sha256:f018cfc7c5797b29b9e59750812d98762b70b94f8670db2372a3e8b69dd36e7e"
	digestFail   = "sha256:bb743e99ba290741c163304f1962cf0078cbb9deaeff93d8c36d2486f53759ee"
	digestNoSuch = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	fixtureRepo  = "oci://127.0.0.1:25000/charts/"
)

// replayStep is the step ID the replays write into operator.aicr.run/step.
const replayStep = "r-fixture/1"

type snapshot struct {
	TMs             int               `json:"t_ms"`
	NotFound        bool              `json:"notFound"`
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations"`
	Status          json.RawMessage   `json:"status"`
	Operation       json.RawMessage   `json:"operation"`
}

type event struct {
	TMs   int    `json:"t_ms"`
	Event string `json:"event"`
}

// sequence says what was written in one recording and what readiness must conclude from it.
type sequence struct {
	// chart, digest, values and namespace are what the write put into the spec.
	chart, digest, values, namespace string
	// automatedOff: the Application was written with automated.enabled false.
	automatedOff bool
	// from is the t_ms of the step's write (from the events file); earlier snapshots show the
	// Application before the step and are not replayed.
	from int
	// write is the step-write annotation; gate marks a readiness release.
	write string
	gate  bool
	// refreshAt is the t_ms of the refresh request (refresh-for = the step from then on); -1:
	// the refresh was made and answered before the recording starts.
	refreshAt int
	// opAt is the t_ms at which the operator wrote its explicit sync .operation: the recorded
	// operation lacks the aicr-step info the operator's carries (appspec.SyncOperation), so the
	// replay adds it to the operation written then, as Argo CD copies .operation into
	// operationState.operation.
	opAt int
	// deleteAt is the t_ms of the DELETE: deletionTimestamp is set from then on.
	deleteAt int
	// firstReady is the index of the first snapshot readiness must call ready (-1: never);
	// every later snapshot is ready too, except those in notReady (index: why).
	firstReady int
	notReady   map[int]string
	// failedFrom is the index from which the verdict must be Failed (-1: never).
	failedFrom int
	// why narrates the expectation.
	why string
}

var sequences = map[string]sequence{
	"01-create": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-web",
		write: v1alpha1.StepWriteChanged, firstReady: 9, failedFrom: -1,
		why: "a busy first creation: Synced/Healthy at 7 with the PostSync hook still running; the sync Succeeded at 9",
	},
	"01b-create-clean": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-drift",
		write: v1alpha1.StepWriteChanged, firstReady: 6, failedFrom: -1,
		why: "Synced/Healthy at 4 while the operation still runs its hook; Succeeded at 6",
	},
	"02-values-upgrade": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v2","replicas":3}`, namespace: "fx-web",
		from: 1002, write: v1alpha1.StepWriteChanged, firstReady: 8, failedFrom: -1,
		why: "1 is the stale Synced/Healthy/Succeeded with the old values in comparedTo; 5 is Synced/Healthy with the hook pending; Succeeded at 8",
	},
	"02b-values-upgrade-watch": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v3","replicas":3}`, namespace: "fx-drift",
		from: 1002, write: v1alpha1.StepWriteChanged, firstReady: 13, failedFrom: -1,
		why: "every resourceVersion: stale window at 1-2 (old comparedTo, operationState removed at 2), Succeeded with .operation cleared at 13",
	},
	"02c-values-upgrade-watch-run0": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v2","replicas":3}`, namespace: "fx-drift",
		from: 1003, write: v1alpha1.StepWriteChanged, firstReady: 13, failedFrom: -1,
		why: "phase Running written before the new comparedTo (3); Succeeded at 13",
	},
	"03-digest-upgrade-slow-rollout": {
		chart: "fx-web", digest: digestWeb2, values: `{"message":"v2","replicas":3}`, namespace: "fx-web",
		from: 1001, write: v1alpha1.StepWriteChanged, firstReady: 6, failedFrom: -1,
		why: "OutOfSync/Healthy at 2 (old pods), 39 s Progressing, Healthy with the hook pending at 5, Succeeded at 6",
	},
	"04-noop-and-refresh": {
		chart: "fx-web", digest: digestWeb2, values: `{"message":"v2","replicas":3}`, namespace: "fx-web",
		write: v1alpha1.StepWriteUnchanged, refreshAt: 16201, firstReady: 1, failedFrom: -1,
		why: "the step changed nothing: 0 is Synced/Healthy from before the step (no refresh yet); at 1 Argo CD removed the refresh annotation",
	},
	"04b-noop-and-refresh-watch": {
		chart: "fx-web", digest: digestWeb3, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		write: v1alpha1.StepWriteUnchanged, refreshAt: 11237, firstReady: 2, failedFrom: -1,
		notReady: map[int]string{3: "someone set refresh: hard; while any refresh annotation is set the handshake reads as pending"},
		why:      "0 predates the refresh; 1 shows the refresh annotation (39 ms); 2 is the controller's write removing it",
	},
	"05-explicit-sync": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-manual", automatedOff: true,
		write: v1alpha1.StepWriteChanged, gate: true, opAt: 1002, firstReady: 8, failedFrom: -1,
		why: "a readiness release synced explicitly: Synced/Healthy at 6 with our operation Running, Succeeded at 8",
	},
	"05a-manual-app-create": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-manual", automatedOff: true,
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: -1,
		why: "automated sync off and no operation: OutOfSync/Missing, never ready",
	},
	"05b-explicit-sync-clearing-operationState": {
		chart: "fx-web", digest: digestWeb3, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		write: v1alpha1.StepWriteUnchanged, refreshAt: -1, gate: true, opAt: 1003, firstReady: 10, failedFrom: -1,
		why: "0 is Synced/Healthy/Succeeded from an earlier sync, not ours; our operation Succeeded at 10",
	},
	"06-hook-only-change": {
		chart: "fx-web", digest: digestWeb3, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		from: 1003, write: v1alpha1.StepWriteChanged, firstReady: 2, failedFrom: -1,
		why: "hook-only change: no sync ever runs (syncResult stays at the old digest), but 2 is Argo CD's comparison of the new digest, Synced/Healthy: nothing to sync, ready",
	},
	"06a-hook-app-create": {
		chart: "fx-web", digest: digestWeb2, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		write: v1alpha1.StepWriteChanged, firstReady: 10, failedFrom: -1,
		why: "creation with pods held back: OutOfSync/Healthy at 5, Healthy with the hook pending at 8-9, Succeeded at 10",
	},
	"06b-explicit-sync-after-hook-only": {
		chart: "fx-web", digest: digestWeb3, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		write: v1alpha1.StepWriteChanged, gate: true, opAt: 1002, firstReady: 3, failedFrom: -1,
		why: "the readiness release's explicit sync after a hook-only change: 0 is 06's end state (Synced, old syncResult), Succeeded at 3",
	},
	"07a-error-missing-digest": {
		chart: "fx-web", digest: digestNoSuch, values: `{"message":"v1","replicas":2}`, namespace: "fx-bad",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: 2,
		why: "ComparisonError with health Healthy: Failed on NoErrorCondition",
	},
	"07b-error-missing-namespace": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-missing",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: -1,
		why: "apply fails; between retries phase stays Running with finishedAt set: Open, never ready",
	},
	"07b-error-missing-namespace-continued": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-missing",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: 0,
		why: "final Failed phase and SyncError: Failed",
	},
	"08-failing-hook": {
		chart: "fx-fail", digest: digestFail, values: `{"replicas":1}`, namespace: "fx-fail",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: -1,
		why: "Synced/Healthy throughout while the hook fails and Argo CD retries: never ready",
	},
	"08b-failing-hook-continued": {
		chart: "fx-fail", digest: digestFail, values: `{"replicas":1}`, namespace: "fx-fail",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: 5,
		why: "the last retry fails: phase Failed with .operation cleared, Synced/Healthy and no condition: Failed on SyncedAfterStep",
	},
	"09-removal": {
		chart: "fx-web", digest: digestWeb2, values: `{"message":"v2","replicas":3}`, namespace: "fx-web",
		write: v1alpha1.StepWriteChanged, deleteAt: 12265, firstReady: 0, failedFrom: -1,
		notReady: map[int]string{2: "deletionTimestamp is set: the Application is being deleted"},
		why:      "the last step's sync succeeded long ago: ready until the DELETE",
	},
	"09b-removal-watch": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-manual", automatedOff: true,
		write: v1alpha1.StepWriteChanged, deleteAt: 6361, firstReady: 0, failedFrom: -1,
		notReady: map[int]string{2: "being deleted", 3: "being deleted", 4: "being deleted", 5: "being deleted", 6: "being deleted"},
		why:      "ready until the DELETE; then Argo CD removes the resources",
	},
	"10-hand-edits": {
		chart: "fx-web", digest: digestWeb1, values: `{"message":"v1","replicas":2}`, namespace: "fx-drift",
		from: 74916, write: v1alpha1.StepWriteChanged, firstReady: 17, failedFrom: -1,
		why: "the operator's forced apply after hand edits: 11 shows the new comparedTo with our values, Succeeded at 17",
	},
	"11a-resync30-hook-only-change": {
		chart: "fx-web", digest: digestWeb2, values: `{"message":"v1","replicas":2}`, namespace: "fx-hook",
		from: 1002, write: v1alpha1.StepWriteChanged, firstReady: 2, failedFrom: -1,
		why: "hook-only change with a 30 s resync: still no sync, but the comparison at 2 found the new digest Synced/Healthy: ready",
	},
	"11b-resync30-failing-hook": {
		chart: "fx-fail", digest: digestFail, values: `{"replicas":1}`, namespace: "fx-fail",
		write: v1alpha1.StepWriteChanged, firstReady: -1, failedFrom: 26,
		why: "failing hook: Open through three retries, Failed once the final attempt ends",
	},
}

// TestReplayFixtures replays every recorded sequence through Evaluate. Readiness never says
// ready before Argo CD compared the written spec, found it Synced and Healthy with no operation
// running and no failed sync of it (checked against the raw snapshot, independently of
// Evaluate), and says it from the named snapshot on.
func TestReplayFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		if strings.Contains(base, ".") {
			continue // events files
		}
		seen++
		seq, ok := sequences[base]
		if !ok {
			t.Errorf("%s: recorded sequence without an expectation; add it to sequences", base)
			continue
		}
		t.Run(base, func(t *testing.T) {
			snaps := loadSnapshots(t, f)
			replayed := 0
			for i, s := range snaps {
				if s.NotFound || s.TMs < seq.from {
					continue
				}
				replayed++
				app := seq.application(t, s)
				v := Evaluate(app, Plan{Digest: seq.digest, Want: &argoapp.Application{Spec: seq.spec()}})
				wantReady := seq.firstReady >= 0 && i >= seq.firstReady
				if why, ok := seq.notReady[i]; ok {
					wantReady = false
					_ = why
				}
				if v.Ready != wantReady {
					t.Errorf("snapshot %d (t=%d ms): ready = %v, want %v (%s)\n%s", i, s.TMs, v.Ready, wantReady, seq.why, v.Summary())
				}
				if v.Ready && !syncedAndHealthy(t, app, s) {
					t.Errorf("snapshot %d (t=%d ms): ready although the raw status does not show the written spec compared Synced and Healthy with no sync running or failed", i, s.TMs)
				}
				wantFailed := seq.failedFrom >= 0 && i >= seq.failedFrom
				if v.Failed != wantFailed {
					t.Errorf("snapshot %d (t=%d ms): failed = %v, want %v (%s)\n%s", i, s.TMs, v.Failed, wantFailed, seq.why, v.Summary())
				}
			}
			if replayed == 0 {
				t.Fatalf("no snapshot replayed")
			}
		})
	}
	if seen != len(sequences) {
		t.Errorf("found %d recorded sequences in testdata, expectations name %d", seen, len(sequences))
	}
}

func loadSnapshots(t *testing.T, path string) []snapshot {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var snaps []snapshot
	if err := json.Unmarshal(raw, &snaps); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return snaps
}

// spec is the README's "Application shape used" with this sequence's write.
func (q sequence) spec() argoapp.ApplicationSpec {
	enabled, yes := !q.automatedOff, true
	return argoapp.ApplicationSpec{
		Project: "aicr",
		Source: &argoapp.ApplicationSource{
			RepoURL:        fixtureRepo + q.chart,
			Path:           ".",
			TargetRevision: q.digest,
			Helm:           &argoapp.ApplicationSourceHelm{ValuesObject: &runtime.RawExtension{Raw: []byte(q.values)}},
		},
		Destination: argoapp.ApplicationDestination{Server: appspec.InClusterServer, Namespace: q.namespace},
		SyncPolicy: &argoapp.SyncPolicy{
			Automated:   &argoapp.SyncPolicyAutomated{Enabled: &enabled, Prune: &yes, SelfHeal: &yes},
			Retry:       appspec.Retry(),
			SyncOptions: appspec.SyncOptions(),
		},
		IgnoreDifferences: appspec.IgnoreDifferences(),
	}
}

// application is the Application as it stood at snapshot s: the recorded status, operation and
// annotations, with the spec and step annotations the operator wrote.
func (q sequence) application(t *testing.T, s snapshot) *argoapp.Application {
	t.Helper()
	ann := map[string]string{}
	for k, v := range s.Annotations {
		ann[k] = v
	}
	ann[v1alpha1.AnnotationStep] = replayStep
	ann[v1alpha1.AnnotationStepWrite] = q.write
	if q.gate {
		ann[v1alpha1.AnnotationReadinessGate] = "true"
	}
	if q.write == v1alpha1.StepWriteUnchanged && (q.refreshAt < 0 || (q.refreshAt > 0 && s.TMs >= q.refreshAt)) {
		ann[v1alpha1.AnnotationRefreshFor] = replayStep
	}
	if q.write == v1alpha1.StepWriteChanged {
		// The changed writes were recorded before the applier asked for a refresh after every
		// write: no refresh request stands in them, so the handshake reads as answered from
		// the write on, and these replays judge the fences besides it (the handshake's own
		// replays are the unchanged ones, 04 and 04b).
		ann[v1alpha1.AnnotationRefreshFor] = replayStep
	}
	app := &argoapp.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "fixture", Namespace: "argocd", Annotations: ann, ResourceVersion: s.ResourceVersion},
		Spec:       q.spec(),
	}
	if q.deleteAt > 0 && s.TMs >= q.deleteAt {
		app.DeletionTimestamp = &metav1.Time{}
	}
	if len(s.Status) > 0 && string(s.Status) != "null" {
		if err := json.Unmarshal(s.Status, &app.Status); err != nil {
			t.Fatalf("decode status at t=%d: %v", s.TMs, err)
		}
	}
	if len(s.Operation) > 0 && string(s.Operation) != "null" {
		app.Operation = &argoapp.Operation{}
		if err := json.Unmarshal(s.Operation, app.Operation); err != nil {
			t.Fatalf("decode operation at t=%d: %v", s.TMs, err)
		}
	}
	if q.gate && q.opAt > 0 && s.TMs >= q.opAt {
		info := &argoapp.Info{Name: appspec.StepInfoName, Value: replayStep}
		if op := app.Operation; op != nil && op.InitiatedBy.Username == v1alpha1.FieldManager {
			op.Info = append(op.Info, info)
		}
		if os := app.Status.OperationState; os != nil && os.Operation.InitiatedBy.Username == v1alpha1.FieldManager {
			os.Operation.Info = append(os.Operation.Info, info)
		}
	}
	return app
}

// syncedAndHealthy is the README's rules 1-3 read straight from the raw snapshot JSON: the
// independent oracle that readiness never runs ahead of. A comparison of the written spec that
// found it Synced counts as the reconcile after the write (no sync runs when nothing differs);
// a sync of it still running, or failed, does not.
func syncedAndHealthy(t *testing.T, app *argoapp.Application, s snapshot) bool {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(s.Status, &st); err != nil || st == nil {
		return false
	}
	specSource := toMap(t, app.Spec.Source)
	specDest := toMap(t, app.Spec.Destination)
	get := func(m any, path ...string) any {
		for _, p := range path {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil
			}
			m = mm[p]
		}
		return m
	}
	phase := get(st, "operationState", "phase")
	failedOfSpec := (phase == "Failed" || phase == "Error") && get(st, "operationState", "syncResult", "revision") == app.Spec.Source.TargetRevision
	return string(s.Operation) == "null" &&
		reflect.DeepEqual(get(st, "sync", "comparedTo", "source"), specSource) &&
		reflect.DeepEqual(get(st, "sync", "comparedTo", "destination"), specDest) &&
		get(st, "sync", "status") == "Synced" &&
		get(st, "sync", "revision") == app.Spec.Source.TargetRevision &&
		get(st, "health", "status") == "Healthy" &&
		phase != "Running" && !failedOfSpec
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReplayEventsFiles keeps the replay honest about its write times: each sequence's from,
// refreshAt, opAt and deleteAt match an event in its events file.
func TestReplayEventsFiles(t *testing.T) {
	for name, seq := range sequences {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name+".events.json"))
			if err != nil {
				t.Fatal(err)
			}
			var events []event
			if err := json.Unmarshal(raw, &events); err != nil {
				t.Fatal(err)
			}
			at := map[int]string{}
			for _, e := range events {
				at[e.TMs] = e.Event
			}
			for what, tms := range map[string]int{"from": seq.from, "refreshAt": seq.refreshAt, "opAt": seq.opAt, "deleteAt": seq.deleteAt} {
				if tms <= 0 {
					continue
				}
				if _, ok := at[tms]; !ok {
					t.Errorf("%s = %d names no event in %s.events.json (%s)", what, tms, name, fmt.Sprint(events))
				}
			}
		})
	}
}
