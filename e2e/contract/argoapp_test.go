package contract_test

// The contract test: package argoapp must be a faithful subset of Argo CD v3.4.2's
// pkg/apis/application/v1alpha1. It is what lets the applier and readiness binaries drop the
// upstream package, so it checks three ways:
//
//   - the types: every argoapp struct field exists in Argo CD's type under the same Go name,
//     JSON name and (for named types) type name;
//   - recorded objects (testdata/, from a real Argo CD v3.4.2) and the Applications appspec
//     builds: decoded into argoapp and encoded again, they give exactly what Argo CD's type
//     gives for the fields argoapp declares, and Argo CD's type reads the result back the same;
//   - a fully populated Argo CD Application: every field argoapp declares is set after decoding
//     it into argoapp (a JSON name typo leaves the field empty), and survives the way back into
//     Argo CD's type unchanged.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

const fixtures = "testdata/argocd-v3.4.2"

var (
	rawExtensionType = reflect.TypeFor[runtime.RawExtension]()
	timeType         = reflect.TypeFor[time.Time]()
)

// opaque reports whether argoapp keeps a type as uninterpreted JSON, or it is a Kubernetes type
// argoapp shares with Argo CD (compared as a whole).
func opaque(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t == rawExtensionType || t == timeType || t.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1"
}

// jsonName is a field's JSON name ("" for an inlined field, "-" for a skipped one).
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" && !f.Anonymous {
		return f.Name
	}
	return name
}

// TestTypesMatchUpstream walks argoapp's types beside Argo CD's: the same Go field names, JSON
// tags and type names, so code and tests convert by changing the import path.
func TestTypesMatchUpstream(t *testing.T) {
	pairs := []struct{ lean, up any }{
		{argoapp.Application{}, argov1alpha1.Application{}},
		{argoapp.ApplicationList{}, argov1alpha1.ApplicationList{}},
		{argoapp.AppProject{}, argov1alpha1.AppProject{}},
		{argoapp.AppProjectList{}, argov1alpha1.AppProjectList{}},
	}
	for _, p := range pairs {
		compareTypes(t, reflect.TypeOf(p.lean), reflect.TypeOf(p.up), reflect.TypeOf(p.lean).Name())
	}
	for name, c := range map[string][2]string{
		"SyncStatusCodeSynced":    {string(argoapp.SyncStatusCodeSynced), string(argov1alpha1.SyncStatusCodeSynced)},
		"SyncStatusCodeOutOfSync": {string(argoapp.SyncStatusCodeOutOfSync), string(argov1alpha1.SyncStatusCodeOutOfSync)},
		"SyncStatusCodeUnknown":   {string(argoapp.SyncStatusCodeUnknown), string(argov1alpha1.SyncStatusCodeUnknown)},
		"ConditionComparison":     {argoapp.ApplicationConditionComparisonError, argov1alpha1.ApplicationConditionComparisonError},
		"ConditionSync":           {argoapp.ApplicationConditionSyncError, argov1alpha1.ApplicationConditionSyncError},
		"ConditionInvalidSpec":    {argoapp.ApplicationConditionInvalidSpecError, argov1alpha1.ApplicationConditionInvalidSpecError},
		"Group":                   {argoapp.SchemeGroupVersion.String(), argov1alpha1.SchemeGroupVersion.String()},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %q, Argo CD's is %q", name, c[0], c[1])
		}
	}
}

func compareTypes(t *testing.T, lean, up reflect.Type, path string) {
	t.Helper()
	for lean.Kind() == reflect.Pointer && up.Kind() == reflect.Pointer {
		lean, up = lean.Elem(), up.Elem()
	}
	if opaque(lean) || opaque(up) {
		switch {
		case lean == rawExtensionType && up.Kind() != reflect.Struct:
			t.Errorf("%s: argoapp keeps raw JSON where Argo CD has %s (want an object)", path, up)
		case lean != rawExtensionType && lean != up:
			t.Errorf("%s: type %s, Argo CD's is %s", path, lean, up)
		}
		return
	}
	if lean.Kind() != up.Kind() {
		t.Errorf("%s: kind %s, Argo CD's is %s (%s)", path, lean.Kind(), up.Kind(), up)
		return
	}
	if lean.Name() != up.Name() {
		t.Errorf("%s: type name %q, Argo CD's is %q", path, lean.Name(), up.Name())
	}
	switch lean.Kind() {
	case reflect.Slice, reflect.Array:
		compareTypes(t, lean.Elem(), up.Elem(), path+"[]")
	case reflect.Map:
		compareTypes(t, lean.Key(), up.Key(), path+"{key}")
		compareTypes(t, lean.Elem(), up.Elem(), path+"{}")
	case reflect.Struct:
		for i := range lean.NumField() {
			lf := lean.Field(i)
			uf, ok := up.FieldByName(lf.Name)
			if !ok || len(uf.Index) != 1 {
				t.Errorf("%s.%s: Argo CD's %s has no field %s", path, lf.Name, up.Name(), lf.Name)
				continue
			}
			if lf.Tag.Get("json") != uf.Tag.Get("json") {
				t.Errorf("%s.%s: json tag %q, Argo CD's is %q", path, lf.Name, lf.Tag.Get("json"), uf.Tag.Get("json"))
			}
			if lf.Anonymous != uf.Anonymous {
				t.Errorf("%s.%s: embedded %v, Argo CD's %v", path, lf.Name, lf.Anonymous, uf.Anonymous)
			}
			compareTypes(t, lf.Type, uf.Type, path+"."+lf.Name)
		}
	}
}

// schema is the set of JSON fields a Go type declares.
type schema struct {
	all    bool // every field below (an opaque or leaf value)
	fields map[string]*schema
	elem   *schema
}

func schemaOf(t reflect.Type) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return &schema{all: true}
	}
	switch t.Kind() {
	case reflect.Struct:
		s := &schema{fields: map[string]*schema{}}
		addFields(s, t)
		return s
	case reflect.Slice, reflect.Array:
		return &schema{elem: schemaOf(t.Elem())}
	}
	return &schema{all: true}
}

func addFields(s *schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		switch name := jsonName(f); {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous:
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" { // TypeMeta
				for j := range ft.NumField() {
					s.fields[jsonName(ft.Field(j))] = &schema{all: true}
				}
				continue
			}
			addFields(s, ft)
		default:
			s.fields[name] = schemaOf(f.Type)
		}
	}
}

// restrict keeps of a decoded JSON value what s declares.
func restrict(v any, s *schema) any {
	if s == nil || s.all {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range x {
			if cs, ok := s.fields[k]; ok {
				out[k] = restrict(c, cs)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = restrict(c, s.elem)
		}
		return out
	}
	return v
}

func generic(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out
}

func decode[T any](t *testing.T, raw []byte) *T {
	t.Helper()
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode into %T: %v", out, err)
	}
	return &out
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return raw
}

var appSchema = schemaOf(reflect.TypeFor[argoapp.Application]())

// checkSubset is the round trip of one Application: argoapp's encoding equals Argo CD's for
// argoapp's fields, and Argo CD reads argoapp's encoding back to the same.
func checkSubset(t *testing.T, raw []byte) {
	t.Helper()
	want := restrict(generic(t, decode[argov1alpha1.Application](t, raw)), appSchema)
	leanRaw := encode(t, decode[argoapp.Application](t, raw))
	var got any
	if err := json.Unmarshal(leanRaw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("argoapp's encoding differs from Argo CD's restricted to argoapp's fields (-argo +argoapp):\n%s", diff)
	}
	back := restrict(generic(t, decode[argov1alpha1.Application](t, leanRaw)), appSchema)
	if diff := cmp.Diff(want, back); diff != "" {
		t.Errorf("Argo CD reads argoapp's encoding differently (-original +through argoapp):\n%s", diff)
	}
}

// recordedApplications turns every recorded object in testdata into Application JSON: the full
// Application; each status snapshot (status, operation, annotations); the recorded specs and
// managedFields.
func recordedApplications(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtures, err)
	}
	out := map[string][]byte{}
	add := func(name string, obj map[string]any) {
		obj["apiVersion"], obj["kind"] = "argoproj.io/v1alpha1", "Application"
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = raw
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		switch x := v.(type) {
		case map[string]any:
			switch {
			case x["kind"] == "Application":
				add(base, x)
			case x["destination"] != nil && x["source"] != nil: // a recorded spec
				add(base, map[string]any{"metadata": map[string]any{"name": "spec"}, "spec": x})
			default:
				t.Fatalf("%s: unknown fixture shape", base)
			}
		case []any:
			if strings.Contains(base, "managedFields") {
				add(base, map[string]any{"metadata": map[string]any{"name": "fields", "managedFields": x}})
				continue
			}
			for i, s := range x {
				snap, _ := s.(map[string]any)
				if snap == nil || snap["notFound"] == true {
					continue
				}
				obj := map[string]any{"metadata": map[string]any{"name": "snapshot", "annotations": snap["annotations"]}}
				for _, k := range []string{"status", "operation"} {
					if snap[k] != nil {
						obj[k] = snap[k]
					}
				}
				add(fmt.Sprintf("%s[%d]", base, i), obj)
			}
		}
	}
	return out
}

func TestRecordedApplicationsRoundTrip(t *testing.T) {
	apps := recordedApplications(t)
	if len(apps) < 100 {
		t.Fatalf("only %d recorded objects found; the fixtures hold hundreds of snapshots", len(apps))
	}
	names := make([]string, 0, len(apps))
	for n := range apps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { checkSubset(t, apps[n]) })
	}
}

// TestRecordedApplicationKeepsWhatReadinessReads: of the full recorded Application, argoapp keeps
// the status readiness judges and drops the bulk (resources, history).
func TestRecordedApplicationKeepsWhatReadinessReads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures, "01b-full-application-after-create.json"))
	if err != nil {
		t.Fatal(err)
	}
	app := decode[argoapp.Application](t, raw)
	st := app.Status
	if st.Sync.Status != argoapp.SyncStatusCodeSynced || st.Health.Status != argoapp.HealthStatusHealthy ||
		st.OperationState == nil || st.OperationState.Phase != argoapp.OperationSucceeded ||
		st.OperationState.SyncResult == nil || st.OperationState.SyncResult.Revision != app.Spec.Source.TargetRevision ||
		st.Sync.ComparedTo.Source.RepoURL != app.Spec.Source.RepoURL || st.ReconciledAt == nil || len(app.ManagedFields) == 0 {
		t.Errorf("decoded status lacks what readiness reads: %+v", st)
	}
	up := decode[argov1alpha1.Application](t, raw)
	if len(up.Status.Resources) == 0 || len(up.Status.History) == 0 {
		t.Fatalf("fixture has no resources or history; the size check below proves nothing")
	}
	if l, u := len(encode(t, app)), len(encode(t, up)); l >= u {
		t.Errorf("argoapp's Application encodes to %d bytes, Argo CD's to %d: the status bulk was not dropped", l, u)
	}
}

// built are the Applications appspec renders: a release with values, a suspended one, a
// readiness gate with its sync operation.
func built(t *testing.T) map[string]*argoapp.Application {
	t.Helper()
	s := appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "oci://registry.example.com/aicr"}
	rel := &plan.Release{Name: "gpu-operator", Namespace: "gpu-operator", DependsOn: []string{"cert-manager", "nfd"},
		Chart:  plan.ChartRef{Path: "charts/gpu-operator", Digest: "sha256:" + strings.Repeat("a", 64)},
		Values: map[string]any{"driver": map[string]any{"enabled": true, "version": "580.95.05"}, "replicas": json.Number("2"), "big": json.Number("12345678901234567890")}}
	gate := &plan.Release{Name: "gpu-readiness", Namespace: "gpu-operator", ReadinessGate: true,
		Chart: plan.ChartRef{Path: "wrappers/gpu-readiness", Digest: "sha256:" + strings.Repeat("b", 64)}}
	in := appspec.Input{Runtime: "cluster", RuntimeUID: "uid-1", PlanDigest: "sha256:plan", StepID: "r-1/3",
		StepStarted: time.Date(2026, 11, 30, 4, 45, 0, 0, time.UTC)}
	out := map[string]*argoapp.Application{}
	for name, c := range map[string]struct {
		rel     *plan.Release
		suspend bool
	}{"release": {rel, false}, "suspended": {rel, true}, "gate": {gate, false}} {
		i := in
		i.Release, i.SuspendEngine = c.rel, c.suspend
		app, err := appspec.Build(s, i)
		if err != nil {
			t.Fatal(err)
		}
		if c.rel.ReadinessGate {
			app.Operation = appspec.SyncOperation(app, i.StepID)
		}
		out[name] = app
	}
	return out
}

// TestBuiltApplicationsRoundTrip: what the applier applies (and the sync operation it patches)
// encodes through argoapp exactly as through Argo CD's type.
func TestBuiltApplicationsRoundTrip(t *testing.T) {
	for name, app := range built(t) {
		t.Run(name, func(t *testing.T) {
			raw := encode(t, app)
			checkSubset(t, raw)
			// The applier sends argoapp's encoding: it must be Argo CD's, field for field (a null
			// reads as an absent field, which Argo CD's type then omits).
			want := dropNulls(restrict(generic(t, decode[argov1alpha1.Application](t, raw)), appSchema))
			if diff := cmp.Diff(want, dropNulls(generic(t, app))); diff != "" {
				t.Errorf("the built Application encodes differently through Argo CD's type (-argo +argoapp):\n%s", diff)
			}
		})
	}
}

// dropNulls removes the null members of objects.
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range x {
			if c != nil {
				out[k] = dropNulls(c)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = dropNulls(c)
		}
		return out
	}
	return v
}

// TestEveryFieldSurvives decodes a fully populated Argo CD Application into argoapp: every field
// argoapp declares must be set (a JSON name that does not match Argo CD's leaves it empty), and
// encoding it and decoding into Argo CD's type gives back the original values of those fields.
func TestEveryFieldSurvives(t *testing.T) {
	var full argov1alpha1.Application
	fill(reflect.ValueOf(&full).Elem(), "Application", 0)
	raw := encode(t, &full)
	lean := decode[argoapp.Application](t, raw)
	var empty []string
	zeroFields(reflect.ValueOf(lean).Elem(), "Application", &empty)
	if len(empty) > 0 {
		t.Errorf("argoapp fields left empty by a fully populated Argo CD Application (JSON name mismatch?):\n  %s", strings.Join(empty, "\n  "))
	}
	checkSubset(t, raw)

	var project argov1alpha1.AppProject
	fill(reflect.ValueOf(&project).Elem(), "AppProject", 0)
	lp := decode[argoapp.AppProject](t, encode(t, &project))
	empty = nil
	zeroFields(reflect.ValueOf(lp).Elem(), "AppProject", &empty)
	if len(empty) > 0 || lp.Name != project.Name || lp.Namespace != project.Namespace {
		t.Errorf("AppProject %s/%s decoded as %s/%s; empty: %v", project.Namespace, project.Name, lp.Namespace, lp.Name, empty)
	}
}

// TestOperationPhaseCompleted matches gitops-engine's OperationPhase.Completed.
func TestOperationPhaseCompleted(t *testing.T) {
	for _, p := range []argoapp.OperationPhase{argoapp.OperationRunning, argoapp.OperationTerminating, argoapp.OperationFailed, argoapp.OperationError, argoapp.OperationSucceeded} {
		var os argov1alpha1.OperationState
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{"phase":%q}`, p)), &os); err != nil {
			t.Fatal(err)
		}
		if got, want := p.Completed(), os.Phase.Completed(); got != want {
			t.Errorf("%s.Completed() = %v, gitops-engine says %v", p, got, want)
		}
	}
}

// fill sets every field of v to a non-zero value derived from its path.
func fill(v reflect.Value, path string, depth int) {
	if depth > 40 { // no type of the Application nests deeper; a guard against recursion
		return
	}
	switch v.Type() {
	case rawExtensionType:
		v.Set(reflect.ValueOf(runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"k":%q}`, path))}))
		return
	case reflect.TypeFor[metav1.Time]():
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 11, 30, 4, 41, len(path)%60, 0, time.UTC))))
		return
	case reflect.TypeFor[metav1.MicroTime]():
		v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Date(2026, 11, 30, 4, 41, 0, 1000, time.UTC))))
		return
	case reflect.TypeFor[metav1.FieldsV1]():
		v.Set(reflect.ValueOf(metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:project":{}}}`)}))
		return
	case reflect.TypeFor[intstr.IntOrString]():
		v.Set(reflect.ValueOf(intstr.FromString("s-" + path)))
		return
	case reflect.TypeFor[metav1.TypeMeta]():
		v.Set(reflect.ValueOf(metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: strings.Split(path, ".")[0]}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), path, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), path+"[0]", depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, path+".key", depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, path+"{}", depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 4, 41, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), path+"."+f.Name, depth+1)
			}
		}
	}
}

// zeroFields lists the fields of v (argoapp's types) that are empty. Kubernetes' own types
// (ObjectMeta, Time) are the same in both and are not walked.
func zeroFields(v reflect.Value, path string, out *[]string) {
	if v.IsZero() {
		*out = append(*out, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		zeroFields(v.Elem(), path, out)
	case reflect.Slice:
		for i := range v.Len() {
			zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Struct:
		if opaque(v.Type()) {
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			zeroFields(v.Field(i), path+"."+f.Name, out)
		}
	}
}
