package benchargocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// The recorded Argo CD v3.4.2 statuses of the contract test (e2e/contract).
const fixtures = "../contract/testdata/argocd-v3.4.2"

func readJSON[T any](t *testing.T, name string) T {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return v
}

// observation is one recorded status of an Application Argo CD was syncing.
type observation struct {
	TMs       int                        `json:"t_ms"`
	Status    *argoapp.ApplicationStatus `json:"status"`
	Operation *argoapp.Operation         `json:"operation"`
}

// Replaying what Argo CD v3.4.2 recorded for a new Application, the predicate holds only once
// the automated sync finished: not while the operation still runs with Synced and Healthy
// already shown (Argo CD reports those before the sync's final phase), and not before.
func TestReadyOnlyOnceTheRecordedSyncSucceeded(t *testing.T) {
	full := readJSON[argoapp.Application](t, "01b-full-application-after-create.json")
	obs := readJSON[[]observation](t, "01b-create-clean.json")
	if len(obs) < 3 {
		t.Fatalf("fixture has %d observations", len(obs))
	}
	sawSyncedHealthyRunning := false
	for i, o := range obs {
		app := argoapp.Application{Spec: full.Spec, Operation: o.Operation}
		if o.Status != nil {
			app.Status = *o.Status
		}
		ready, why := Ready(&app)
		last := i == len(obs)-1
		if ready != last {
			t.Errorf("observation at %d ms: Ready = %t (%s), want %t", o.TMs, ready, why, last)
		}
		if o.Status != nil && o.Status.Sync.Status == argoapp.SyncStatusCodeSynced && o.Status.Health.Status == argoapp.HealthStatusHealthy &&
			o.Status.OperationState != nil && o.Status.OperationState.Phase == argoapp.OperationRunning {
			sawSyncedHealthyRunning = true
		}
	}
	if !sawSyncedHealthyRunning {
		t.Fatal("the fixture has no Synced+Healthy observation with the operation still running: the early-ready case is not covered")
	}
}

// From the recorded ready Application, each fact the predicate requires is broken once.
func TestReadyRequiresEachFact(t *testing.T) {
	base := readJSON[argoapp.Application](t, "01b-full-application-after-create.json")
	if ok, why := Ready(&base); !ok {
		t.Fatalf("the recorded Application after its sync is not ready: %s", why)
	}
	for _, tc := range []struct {
		name    string
		breakIt func(a *argoapp.Application)
		why     string
	}{
		{"no source", func(a *argoapp.Application) { a.Spec.Source = nil }, "spec.source"},
		{"operation pending", func(a *argoapp.Application) { a.Operation = &argoapp.Operation{} }, "operation is pending"},
		{"out of sync", func(a *argoapp.Application) { a.Status.Sync.Status = argoapp.SyncStatusCodeOutOfSync }, "sync status"},
		{"synced at another revision", func(a *argoapp.Application) { a.Status.Sync.Revision = "sha256:0" }, "synced at"},
		{"progressing", func(a *argoapp.Application) { a.Status.Health.Status = argoapp.HealthStatusProgressing }, "health"},
		{"no operation ran", func(a *argoapp.Application) { a.Status.OperationState = nil }, "no operation"},
		{"operation failed", func(a *argoapp.Application) { a.Status.OperationState.Phase = argoapp.OperationFailed }, "Failed"},
		{"operation synced another revision", func(a *argoapp.Application) { a.Status.OperationState.SyncResult.Revision = "sha256:0" }, "revision"},
		{"values changed since the comparison", func(a *argoapp.Application) {
			a.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"message":"v2","replicas":2}`)}
		}, "comparedTo.source"},
		{"destination changed", func(a *argoapp.Application) { a.Spec.Destination.Namespace = "elsewhere" }, "comparedTo.destination"},
		{"comparison exceptions changed", func(a *argoapp.Application) { a.Spec.IgnoreDifferences = a.Spec.IgnoreDifferences[:1] }, "ignoreDifferences"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base.DeepCopy()
			tc.breakIt(a)
			ok, why := Ready(a)
			if ok || !strings.Contains(why, tc.why) {
				t.Fatalf("Ready = %t (%q), want false naming %q", ok, why, tc.why)
			}
		})
	}
}

// The floor's Application has the operator's spec, none of its ownership marks, and a gate's
// explicit sync.
func TestFloorApplication(t *testing.T) {
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "floor", Version: "1"},
		Components: []plan.Component{
			{Name: "f1-web", Namespace: "web", Chart: plan.ChartRef{Path: "charts/web", Digest: "sha256:" + strings.Repeat("a", 64)}, Values: json.RawMessage(`{"replicas":1}`)},
			{Name: "f1-gate", Namespace: "web", Chart: plan.ChartRef{Path: "charts/gate", Digest: "sha256:" + strings.Repeat("b", 64)}, ReadinessGate: true, DependsOn: []string{"f1-web"}},
		}}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	settings := appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "registry.example.com/aicr"}
	for _, r := range p.Releases {
		built, err := appspec.Build(settings, appspec.Input{Runtime: "cluster", RuntimeUID: "uid", PlanDigest: p.Digest(), Release: &r, StepID: "r/1", StepStarted: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		app := FloorApplication(built, "run-1")
		if _, owned := app.Labels[v1alpha1.LabelManagedBy]; owned || app.Labels[LabelFloor] != "run-1" {
			t.Errorf("%s: labels %v, want no %s and %s=run-1", r.Name, app.Labels, v1alpha1.LabelManagedBy, LabelFloor)
		}
		for k := range app.Annotations {
			if strings.HasPrefix(k, v1alpha1.Group+"/") {
				t.Errorf("%s: operator annotation %s kept", r.Name, k)
			}
		}
		if a, b := mustJSON(t, app.Spec), mustJSON(t, built.Spec); a != b {
			t.Errorf("%s: spec differs from the operator's:\n%s\n%s", r.Name, a, b)
		}
		switch {
		case r.ReadinessGate && (app.Operation == nil || app.Operation.Sync == nil || app.Operation.Sync.Revision != r.Chart.Digest):
			t.Errorf("%s: gate without an explicit sync of its revision: %+v", r.Name, app.Operation)
		case !r.ReadinessGate && app.Operation != nil:
			t.Errorf("%s: an operation on a release Argo CD syncs automatically", r.Name)
		}
		if _, owned := built.Labels[v1alpha1.LabelManagedBy]; !owned {
			t.Errorf("%s: FloorApplication changed its input", r.Name)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
