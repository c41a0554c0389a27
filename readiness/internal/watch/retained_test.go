package watch

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/plantest"
)

// BenchmarkTransformedApplicationRetained decodes the Applications of a GPU-stack plan (40
// releases, plantest.GPUStackBundle) as the informer does, each with Argo CD's copies of its
// values in comparedTo and the sync result and a managedFields entry of its creator's covering
// the spec, runs Transform, and reports the heap each one keeps alive after a collection
// (retained-KiB/app), next to its JSON (json-KiB/app) and its values (values-KiB/app): what
// readiness's cache holds per Application, without the API server.
func BenchmarkTransformedApplicationRetained(b *testing.B) {
	p, err := plan.Resolve(plantest.GPUStackBundle(40, 10), plan.Inputs{})
	if err != nil {
		b.Fatal(err)
	}
	var docs [][]byte
	var jsonBytes, valueBytes int
	for i := range p.Releases {
		r := &p.Releases[i]
		app, err := appspec.Build(testSettings, appspec.Input{Runtime: "cluster", RuntimeUID: "rt-uid", PlanDigest: p.Digest(), Release: r,
			StepID: fmt.Sprintf("r-1/%d", i+1), StepStarted: time.Unix(1_800_000_000, 0)})
		if err != nil {
			b.Fatal(err)
		}
		app.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "e2e-creator", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: specFieldSet(b, app)}}}
		app.Status.Sync.ComparedTo.Source = *app.Spec.Source.DeepCopy()
		app.Status.OperationState = &argoapp.OperationState{SyncResult: &argoapp.SyncOperationResult{Source: *app.Spec.Source.DeepCopy()}}
		doc, err := json.Marshal(app)
		if err != nil {
			b.Fatal(err)
		}
		values, _ := r.ValuesJSON()
		docs, jsonBytes, valueBytes = append(docs, doc), jsonBytes+len(doc), valueBytes+len(values)
	}
	const copies = 10
	var retained float64
	for b.Loop() {
		kept := make([]any, 0, copies*len(docs))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range copies {
			for _, doc := range docs {
				var a argoapp.Application
				if err := json.Unmarshal(doc, &a); err != nil {
					b.Fatal(err)
				}
				t, err := Transform(&a)
				if err != nil {
					b.Fatal(err)
				}
				kept = append(kept, t)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained += float64(after.HeapAlloc-before.HeapAlloc) / float64(len(kept))
		runtime.KeepAlive(kept)
	}
	n := float64(len(docs))
	b.ReportMetric(retained/float64(b.N)/1024, "retained-KiB/app")
	b.ReportMetric(float64(jsonBytes)/n/1024, "json-KiB/app")
	b.ReportMetric(float64(valueBytes)/n/1024, "values-KiB/app")
}

// specFieldSet is the field set of app's spec (and metadata) in managedFields' FieldsV1 form, as
// the API server records it for the manager that created the Application.
func specFieldSet(b *testing.B, app *argoapp.Application) []byte {
	b.Helper()
	raw, err := json.Marshal(app)
	if err != nil {
		b.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		b.Fatal(err)
	}
	delete(obj, "status")
	tv, err := typed.DeducedParseableType.FromUnstructured(obj)
	if err != nil {
		b.Fatal(err)
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		b.Fatal(err)
	}
	fields, err := set.ToJSON()
	if err != nil {
		b.Fatal(err)
	}
	return fields
}
