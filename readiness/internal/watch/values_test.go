package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/readiness/internal/removal"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

func TestValuesDigest(t *testing.T) {
	same := [][]string{
		{`{"expr":"a && b <c>"}`, `{"expr":"a \u0026\u0026 b \u003cc\u003E"}`},
		{`{"x":"\\\\"}`, `{"x":"\\\\"}`},
	}
	for _, c := range same {
		if a, b := valuesDigest([]byte(c[0])), valuesDigest([]byte(c[1])); !bytes.Equal(a, b) {
			t.Errorf("digests of %s and %s differ: %s, %s", c[0], c[1], a, b)
		}
	}
	differ := [][]string{
		{`{"replicas":2}`, `{"replicas":3}`},
		// An escaped backslash before u0026 is the text \u0026, not an ampersand.
		{`{"x":"\\u0026"}`, `{"x":"&"}`},
		{`{"x":"\\u0026"}`, `{"x":"\\&"}`},
		{`{"x":"\u0027"}`, `{"x":"'"}`}, // only the three HTML-safe escapes are spelled out
	}
	for _, c := range differ {
		if a, b := valuesDigest([]byte(c[0])), valuesDigest([]byte(c[1])); bytes.Equal(a, b) {
			t.Errorf("digests of %s and %s are the same: %s", c[0], c[1], a)
		}
	}
	d := valuesDigest([]byte(`{"replicas":2}`))
	if !isDigest(d) || isDigest([]byte(`{"replicas":2}`)) {
		t.Errorf("isDigest: %s is one, values are not", d)
	}
	if !appspec.EqualValues(d, d) || appspec.EqualValues(d, valuesDigest([]byte(`{}`))) {
		t.Errorf("digests compared as JSON: equal to themselves only")
	}
}

// The transform keeps the values as digests and cuts their keys from managedFields, and judges
// every combination of the spec's values and Argo CD's copies as it did with the values: the
// same, spelled differently, other values, none.
func TestTransformKeepsValuesAsDigests(t *testing.T) {
	p, _ := testPlan(t)
	spelled := []byte(`{"replicas":2.0}`)
	other := []byte(`{"replicas":3}`)
	for _, c := range []struct {
		name                 string
		comparedTo, synced   []byte // nil: the spec's own bytes
		sharedCT, sharedSync bool   // the copy shares the spec's digest after the transform
	}{
		{"copies of the spec", nil, nil, true, true},
		{"compared spelled differently", spelled, nil, true, true},
		{"compared other values", other, nil, false, true},
		{"synced other values", nil, other, true, false},
		{"both other", other, other, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := written(t, p, "r-1/1")
			if c.comparedTo != nil {
				app.Status.Sync.ComparedTo.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: c.comparedTo}
			}
			if c.synced != nil {
				app.Status.OperationState.SyncResult.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: c.synced}
			}
			app.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:operator.aicr.run/step":{}}},"f:spec":{"f:project":{},"f:source":{"f:helm":{"f:valuesObject":{".":{},"f:replicas":{}}},"f:path":{}}}}`)}}}
			before := app.DeepCopy()
			obj, err := Transform(app)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*argoapp.Application)
			spec := got.Spec.Source.Helm.ValuesObject
			if !isDigest(spec.Raw) {
				t.Fatalf("spec values kept as %s, want a digest", spec.Raw)
			}
			ct, sr := got.Status.Sync.ComparedTo.Source.Helm.ValuesObject, got.Status.OperationState.SyncResult.Source.Helm.ValuesObject
			if !isDigest(ct.Raw) || !isDigest(sr.Raw) {
				t.Errorf("copies kept as %s and %s, want digests", ct.Raw, sr.Raw)
			}
			if (ct == spec) != c.sharedCT || (sr == spec) != c.sharedSync {
				t.Errorf("comparedTo shares the spec's digest: %v, want %v; syncResult: %v, want %v", ct == spec, c.sharedCT, sr == spec, c.sharedSync)
			}
			fields := string(got.ManagedFields[0].FieldsV1.Raw)
			if strings.Contains(fields, "f:replicas") || !strings.Contains(fields, `"f:valuesObject":{}`) || !strings.Contains(fields, `"f:path"`) ||
				!strings.Contains(fields, "f:operator.aicr.run/step") {
				t.Errorf("managed fields %s: want the values' keys cut, the rest kept", fields)
			}
			if diff := cmp.Diff(fencesOf(before), fencesOf(got)); diff != "" {
				t.Errorf("the transform changed the verdict (-before +after):\n%s", diff)
			}
		})
	}
}

// A hand edit of one of the values is reported with the field it changed and who changed it,
// read from the Application in the API server (the cache holds a digest); an Application as
// written is judged from the cache alone.
func TestWatcherNamesValuesDriftFromTheAPIServer(t *testing.T) {
	p, _ := testPlan(t)
	app := written(t, p, "r-1/1")
	ours := metav1.ManagedFieldsEntry{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":{"f:replicas":{}}},"f:path":{}}}}`)}}
	app.ManagedFields = []metav1.ManagedFieldsEntry{ours}
	argo, rec, _ := startWatcher(t, app)
	waitFor(t, rec, "the first verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 && verdicts(s)[0].Ready })
	if n := argo.gets(); n != 0 {
		t.Errorf("%d reads of the Application as written, want 0: the cache judges it", n)
	}

	edited := app.DeepCopy()
	edited.ResourceVersion = "2"
	edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"replicas":5}`)}
	ours.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:source":{"f:path":{}}}}`)}
	edited.ManagedFields = []metav1.ManagedFieldsEntry{ours, {Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":{"f:replicas":{}}}}}}`)}}}
	if _, err := argo.Update(context.Background(), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, rec, "a drift report", func(s []bustest.Sent) bool { return len(drifts(s)) == 1 })
	got := drifts(s)[0]
	want := &bus.DriftReport{Runtime: "cluster", Release: "gpu-operator", PlanDigest: p.Digest(), StepID: "r-1/1", ResourceVersion: "2",
		Kinds: []string{bus.DriftValues}, Fields: []string{valuesPath + ".replicas"}, Managers: []string{"kubectl-edit"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("drift report (-want +got):\n%s", diff)
	}
	if n := argo.gets(); n < 1 {
		t.Errorf("the values drift was named without reading the Application")
	}
}

// Values the API server spells differently from the plan are the plan's: an Application whose
// values differ only by the HTML-safe escapes is judged from the cache; one whose numbers are
// spelled differently is read once, and ready, with no drift.
func TestWatcherComparesValuesSpelledDifferently(t *testing.T) {
	p, cm := planOf(t, `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: test, version: 1.0.0}
components:
- name: gpu-operator
  namespace: gpu-operator
  chart: {path: charts/gpu-operator, digest: "sha256:db3440cd1cf81965a768c454a0dd5323fff8a29d663559ceee99e219f32f11a4"}
  values: {replicas: 2, expr: "a && b > 1"}
`)
	for _, c := range []struct {
		name  string
		live  string
		reads int
	}{
		{"HTML-safe escapes", `{"expr":"a \u0026\u0026 b \u003e 1","replicas":2}`, 0},
		{"numbers", `{"expr":"a && b > 1","replicas":2.0}`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := written(t, p, "r-1/1")
			if v, _ := p.Releases[0].ValuesJSON(); bytes.Equal(v, []byte(c.live)) {
				t.Fatalf("the plan's values are %s already", v)
			}
			for _, s := range []*argoapp.ApplicationSource{app.Spec.Source, &app.Status.Sync.ComparedTo.Source, &app.Status.OperationState.SyncResult.Source} {
				s.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(c.live)}
			}
			argo := newFakeApps(t, app)
			rec := &bustest.Recorder{Dedupe: true}
			runWatcher(t, &Watcher{Apps: argo, Settings: testSettings, Publisher: rec,
				Plans:    plan.NewCache(plan.GetLoader(k8sfake.NewSimpleClientset(cm).CoreV1().ConfigMaps("aicr-system")), 0),
				Removals: &removal.Checker{Rollouts: &fakeRollouts{}}})
			waitFor(t, rec, "a ready verdict", func(s []bustest.Sent) bool { return len(verdicts(s)) == 1 && verdicts(s)[0].Ready })

			// The next step writes the same values: judged again, from what was learnt.
			next := app.DeepCopy()
			next.ResourceVersion = "2"
			next.Annotations[v1alpha1.AnnotationStep] = "r-2/1"
			next.Annotations[v1alpha1.AnnotationStepStarted] = time.Unix(1_800_000_100, 0).UTC().Format(time.RFC3339)
			answered(next)
			if _, err := argo.Update(context.Background(), next, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			s := waitFor(t, rec, "the verdict of step r-2/1", func(s []bustest.Sent) bool {
				vs := verdicts(s)
				return len(vs) == 2 && vs[1].StepID == "r-2/1"
			})
			if v := verdicts(s)[1]; !v.Ready {
				t.Errorf("verdict of r-2/1 not ready: %+v", v.Fences)
			}
			if d := drifts(s); len(d) != 0 {
				t.Errorf("drift reported for the plan's values spelled differently: %+v", d[0])
			}
			if n := argo.gets(); n != c.reads {
				t.Errorf("%d reads of the Application, want %d", n, c.reads)
			}
		})
	}
}

// collapseByMaps is collapse as it first was, each level decoded into a map and encoded again:
// the reference collapse is held to.
func collapseByMaps(raw []byte, path ...string) ([]byte, error) {
	if len(path) == 0 {
		return []byte(`{}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	child, ok := m[path[0]]
	if !ok {
		return nil, errNoPath
	}
	c, err := collapseByMaps(child, path[1:]...)
	if err != nil {
		return nil, err
	}
	m[path[0]] = c
	return json.Marshal(m)
}

var collapseSeeds = []string{
	`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":{".":{},"f:replicas":{}}},"f:path":{}}}}`,
	`{"f:metadata":{"f:annotations":{"f:a/b":{}}},"f:spec":{"f:destination":{"f:server":{}},"f:source":{"f:chart":{},"f:helm":{"f:valuesObject":{"f:x":{"f:y":{}},"f:valuesObject":{}}},"f:path":{}},"f:syncPolicy":{}}}`,
	`{"f:spec":{"f:sources":{},"f:source":{"f:helm":{"f:valuesObject":{"f:k:{\"a\":\"}\"}":{}}}}}}`,
	` { "f:spec" : { "f:source" : { "f:helm" : { "f:releaseName":{}, "f:valuesObject" : { "f:a" : { } } } } } } `,
	`{"f:spec":{"f:source":{"f:helm":{"f:releaseName":{}}}}}`,
	`{"f:spec":{"f:project":{}}}`,
	`{"f:spec":{"f:source":{"f:helm":{"f:valuesObject":[1,{"a":"b"}]}}}}`,
	`{"f:metadata":{}}`,
	`{"f:spec":{"f:source":"x\\"y","f:sourceHydrator":{}}}`,
}

// collapse gives what decoding each level and encoding it again gives: the same field set,
// the values' keys cut, or no path where there is none.
func TestCollapseMatchesDecodingEachLevel(t *testing.T) {
	path := []string{"f:spec", "f:source", "f:helm", "f:valuesObject"}
	for _, seed := range collapseSeeds {
		checkCollapse(t, []byte(seed), path)
	}
}

func FuzzCollapse(f *testing.F) {
	for _, s := range collapseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkCollapse(t, raw, []string{"f:spec", "f:source", "f:helm", "f:valuesObject"})
	})
}

func checkCollapse(t *testing.T, raw []byte, path []string) {
	t.Helper()
	want, errWant := collapseByMaps(raw, path...)
	got, errGot := collapse(raw, path...)
	if errWant != nil {
		// Where the maps found no path, or no JSON, collapse must not claim one.
		if errGot == nil && !json.Valid(raw) {
			t.Fatalf("collapse(%s) = %s for input that is not JSON", raw, got)
		}
		if errors.Is(errWant, errNoPath) && errGot == nil {
			t.Fatalf("collapse(%s) = %s, want no path", raw, got)
		}
		return
	}
	if errGot != nil {
		t.Fatalf("collapse(%s): %v; by maps: %s", raw, errGot, want)
	}
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("collapse(%s) = %s, not JSON: %v", raw, got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("collapse(%s) = %s, by maps %s", raw, got, want)
	}
}
