package appspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

const runtimeUID = "6f1c2b9e-0d4a-4e59-9a53-2d7f3c1e8b10"

var settings = Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "registry.example.com/aicr"}

// vectorPlan is the plan test vector of shared/plan: the same bundle and inputs every binary
// renders from.
func vectorPlan(t *testing.T) *plan.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "plan", "testdata", "vector-plan.json"))
	if err != nil {
		t.Fatalf("read plan vector: %v", err)
	}
	p, err := plan.Decode(data, "")
	if err != nil {
		t.Fatalf("decode plan vector: %v", err)
	}
	return p
}

func release(t *testing.T, p *plan.Plan, name string) *plan.Release {
	t.Helper()
	r, ok := p.Release(name)
	if !ok {
		t.Fatalf("release %s missing from the plan", name)
	}
	return r
}

// TestBuildGPUOperator proves Build renders the Application of docs/argocd.md ("The Application
// shape") for gpu-operator, field by field, and nothing more.
func TestBuildGPUOperator(t *testing.T) {
	p := vectorPlan(t)
	r := release(t, p, "gpu-operator")
	started := time.Date(2026, 5, 14, 11, 29, 58, 123456789, time.FixedZone("CEST", 2*3600))
	got, err := Build(settings, Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: r,
		StepID: "cluster-7/3", StepStarted: started})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	values, err := r.ValuesJSON()
	if err != nil {
		t.Fatalf("ValuesJSON: %v", err)
	}
	yes, enabled, factor := true, true, int64(2)
	want := &argoapp.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "gpu-operator",
			Namespace: "argocd",
			Labels:    map[string]string{"app.kubernetes.io/managed-by": "aicr-operator", "operator.aicr.run/runtime": "cluster"},
			Annotations: map[string]string{
				"operator.aicr.run/runtime-uid":  runtimeUID,
				"operator.aicr.run/plan-digest":  p.Digest(),
				"operator.aicr.run/release-id":   "gpu-operator",
				"operator.aicr.run/depends-on":   "cert-manager,nodewright-customizations",
				"operator.aicr.run/step":         "cluster-7/3",
				"operator.aicr.run/step-started": "2026-05-14T09:29:58Z",
			},
		},
		Spec: argoapp.ApplicationSpec{
			Project: "aicr",
			Source: &argoapp.ApplicationSource{
				RepoURL:        "oci://registry.example.com/aicr/charts/gpu-operator",
				Path:           ".",
				TargetRevision: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
				Helm:           &argoapp.ApplicationSourceHelm{ValuesObject: &runtime.RawExtension{Raw: values}},
			},
			Destination: argoapp.ApplicationDestination{Server: "https://kubernetes.default.svc", Namespace: "gpu-operator"},
			SyncPolicy: &argoapp.SyncPolicy{
				Automated:   &argoapp.SyncPolicyAutomated{Enabled: &enabled, Prune: &yes, SelfHeal: &yes},
				Retry:       &argoapp.RetryStrategy{Limit: 3, Backoff: &argoapp.Backoff{Duration: "30s", Factor: &factor, MaxDuration: "5m"}},
				SyncOptions: argoapp.SyncOptions{"ServerSideApply=true", "RespectIgnoreDifferences=true"},
			},
			IgnoreDifferences: argoapp.IgnoreDifferences{
				{Kind: "Secret", Name: "kubeflow-trainer-webhook-cert", JSONPointers: []string{"/data"}},
				{Kind: "Secret", Name: "jobset-webhook-server-cert", JSONPointers: []string{"/data"}},
				{Group: "storage.k8s.io", Kind: "CSIDriver", JSONPointers: []string{"/spec/preventPodSchedulingIfMissing"}},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Application (-want +got):\n%s", diff)
	}

	// What the page says the operator never writes.
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers = %v, want none (deleting an Application must never delete the stack)", got.Finalizers)
	}
	for _, o := range got.Spec.SyncPolicy.SyncOptions {
		if strings.HasPrefix(o, "CreateNamespace") {
			t.Errorf("sync option %s: the chart pre-creates the namespaces", o)
		}
	}
	if _, ok := got.Annotations[v1alpha1.AnnotationArgoRefresh]; ok {
		t.Errorf("the refresh annotation is part of the applied manifest")
	}
	if got.Operation != nil || got.Status.Sync.Status != "" {
		t.Errorf("Build set an operation or a status")
	}
	if !strings.Contains(string(values), `"version":"580.82.07"`) || !strings.Contains(string(values), `"nvidia.com/gpu.present":"true"`) {
		t.Errorf("valuesObject %s lacks the override and the placement", values)
	}
}

func TestBuildVariants(t *testing.T) {
	t.Parallel()
	p := vectorPlan(t)
	cases := map[string]struct {
		settings Settings
		in       Input
		check    func(t *testing.T, app *argoapp.Application)
	}{
		"SuspendEngine writes automated sync off and says so": {
			in: Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "gpu-operator"), SuspendEngine: true},
			check: func(t *testing.T, app *argoapp.Application) {
				a := app.Spec.SyncPolicy.Automated
				if a == nil || a.Enabled == nil || *a.Enabled {
					t.Errorf("automated = %+v, want enabled false", a)
				}
				if a != nil && (a.Prune == nil || !*a.Prune || a.SelfHeal == nil || !*a.SelfHeal) {
					t.Errorf("automated = %+v, want prune and selfHeal kept for when it resumes", a)
				}
				if app.Annotations[v1alpha1.AnnotationEngineSuspended] != "true" {
					t.Errorf("annotation %s missing", v1alpha1.AnnotationEngineSuspended)
				}
			},
		},
		"a readiness release is marked as one": {
			in: Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "gpu-operator-readiness"), StepID: "cluster-7/4"},
			check: func(t *testing.T, app *argoapp.Application) {
				if app.Annotations[v1alpha1.AnnotationReadinessGate] != "true" {
					t.Errorf("annotation %s = %q, want true", v1alpha1.AnnotationReadinessGate, app.Annotations[v1alpha1.AnnotationReadinessGate])
				}
				if app.Annotations[v1alpha1.AnnotationDependsOn] != "gpu-operator" {
					t.Errorf("depends-on = %q", app.Annotations[v1alpha1.AnnotationDependsOn])
				}
			},
		},
		"a wrapper chart comes from wrappers/": {
			in: Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "nodewright-customizations")},
			check: func(t *testing.T, app *argoapp.Application) {
				if got := app.Spec.Source.RepoURL; got != "oci://registry.example.com/aicr/wrappers/nodewright-customizations" {
					t.Errorf("repoURL = %s", got)
				}
			},
		},
		"a preview without a step carries no step annotations": {
			in: Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "cert-manager")},
			check: func(t *testing.T, app *argoapp.Application) {
				for _, k := range []string{v1alpha1.AnnotationStep, v1alpha1.AnnotationStepStarted, v1alpha1.AnnotationReadinessGate, v1alpha1.AnnotationEngineSuspended} {
					if _, ok := app.Annotations[k]; ok {
						t.Errorf("annotation %s set", k)
					}
				}
				if v, ok := app.Annotations[v1alpha1.AnnotationDependsOn]; !ok || v != "" {
					t.Errorf("depends-on = %q, %v; want present and empty", v, ok)
				}
			},
		},
		"a repository given with oci:// renders the same URL": {
			settings: Settings{EngineNamespace: "gitops", Project: "gpu", Repository: "oci://registry.example.com:5000/aicr"},
			in:       Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "cert-manager")},
			check: func(t *testing.T, app *argoapp.Application) {
				if got := app.Spec.Source.RepoURL; got != "oci://registry.example.com:5000/aicr/charts/cert-manager" {
					t.Errorf("repoURL = %s", got)
				}
				if app.Namespace != "gitops" || app.Spec.Project != "gpu" {
					t.Errorf("namespace, project = %s, %s; want gitops, gpu", app.Namespace, app.Spec.Project)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := tc.settings
			if s == (Settings{}) {
				s = settings
			}
			app, err := Build(s, tc.in)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			tc.check(t, app)
		})
	}
	if _, err := Build(settings, Input{}); err == nil {
		t.Errorf("Build without a release succeeded")
	}
}

// TestBuildIsStable proves two renders of one release are equal: the applier compares its
// render with the live object, and readiness compares drift against a fresh render.
func TestBuildIsStable(t *testing.T) {
	p := vectorPlan(t)
	in := Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "gpu-operator"), StepID: "s/1"}
	a, _ := Build(settings, in)
	b, _ := Build(settings, in)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two renders differ:\n%s", diff)
	}
	if !EqualSource(a.Spec.Source, b.Spec.Source) || !EqualDestination(a.Spec.Destination, b.Spec.Destination) {
		t.Errorf("EqualSource or EqualDestination false for two renders")
	}
}

func TestSyncOperation(t *testing.T) {
	p := vectorPlan(t)
	app, err := Build(settings, Input{Runtime: "cluster", RuntimeUID: runtimeUID, PlanDigest: p.Digest(), Release: release(t, p, "gpu-operator-readiness"), StepID: "cluster-7/4"})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	op := SyncOperation(app, "cluster-7/4")
	factor := int64(2)
	want := &argoapp.Operation{
		Sync: &argoapp.SyncOperation{
			Revision:     "sha256:4444444444444444444444444444444444444444444444444444444444444444",
			Prune:        true,
			SyncOptions:  argoapp.SyncOptions{"ServerSideApply=true", "RespectIgnoreDifferences=true"},
			SyncStrategy: &argoapp.SyncStrategy{Hook: &argoapp.SyncStrategyHook{}},
		},
		InitiatedBy: argoapp.OperationInitiator{Username: "aicr-operator"},
		Info:        []*argoapp.Info{{Name: "aicr-step", Value: "cluster-7/4"}},
		Retry:       argoapp.RetryStrategy{Limit: 3, Backoff: &argoapp.Backoff{Duration: "30s", Factor: &factor, MaxDuration: "5m"}},
	}
	if diff := cmp.Diff(want, op); diff != "" {
		t.Errorf("SyncOperation (-want +got):\n%s", diff)
	}
}

func source(values string) *argoapp.ApplicationSource {
	s := &argoapp.ApplicationSource{RepoURL: "oci://r/charts/a", Path: ".", TargetRevision: "sha256:1"}
	if values != "" {
		s.Helm = &argoapp.ApplicationSourceHelm{ValuesObject: &runtime.RawExtension{Raw: []byte(values)}}
	}
	return s
}

// TestEqualSource proves the comparison the applier (step-write) and readiness (ComparedToSpec)
// rely on: equal means the same chart, revision and values as JSON.
func TestEqualSource(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		a, b *argoapp.ApplicationSource
		want bool
	}{
		"identical":                       {source(`{"a":1}`), source(`{"a":1}`), true},
		"keys in another order":           {source(`{"a":1,"b":{"d":[1,2],"c":"x"}}`), source(`{"b":{"c":"x","d":[1,2]},"a":1}`), true},
		"whitespace":                      {source(`{"a": 1}`), source("{\n  \"a\":1\n}"), true},
		"a number spelled another way":    {source(`{"a":1,"b":0.5}`), source(`{"a":1.0,"b":5e-1}`), true},
		"a different number":              {source(`{"a":1}`), source(`{"a":2}`), false},
		"large integers that differ":      {source(`{"a":12345678901234567}`), source(`{"a":12345678901234568}`), false},
		"large integers spelled two ways": {source(`{"a":12345678901234567}`), source(`{"a":1.2345678901234567e16}`), true},
		"huge exponents spelled two ways": {source(`{"a":1e400}`), source(`{"a":10e399}`), true},
		"huge exponents that differ":      {source(`{"a":1e999999999}`), source(`{"a":1e-999999999}`), false},
		"a number and a string":           {source(`{"a":1}`), source(`{"a":"1"}`), false},
		"list order matters":              {source(`{"a":[1,2]}`), source(`{"a":[2,1]}`), false},
		"an extra key":                    {source(`{"a":1}`), source(`{"a":1,"b":null}`), false},
		"no helm and empty values":        {source(``), source(`{}`), true},
		"another revision":                {source(`{}`), func() *argoapp.ApplicationSource { s := source(`{}`); s.TargetRevision = "sha256:2"; return s }(), false},
		"another repoURL":                 {source(`{}`), func() *argoapp.ApplicationSource { s := source(`{}`); s.RepoURL = "oci://r/charts/b"; return s }(), false},
		"another path":                    {source(`{}`), func() *argoapp.ApplicationSource { s := source(`{}`); s.Path = "sub"; return s }(), false},
		"values that are not JSON":        {source(`{"a":1}`), source(`{"a":`), false},
		"both nil":                        {nil, nil, true},
		"one nil":                         {source(`{}`), nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := EqualSource(tc.a, tc.b); got != tc.want {
				t.Errorf("EqualSource = %v, want %v", got, tc.want)
			}
			if got := EqualSource(tc.b, tc.a); got != tc.want {
				t.Errorf("EqualSource reversed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEqualDestination(t *testing.T) {
	t.Parallel()
	a := argoapp.ApplicationDestination{Server: InClusterServer, Namespace: "gpu-operator"}
	for name, b := range map[string]argoapp.ApplicationDestination{
		"another namespace":    {Server: InClusterServer, Namespace: "nfd"},
		"another server":       {Server: "https://10.0.0.1", Namespace: "gpu-operator"},
		"a cluster name added": {Server: InClusterServer, Namespace: "gpu-operator", Name: "in-cluster"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if EqualDestination(a, b) {
				t.Errorf("EqualDestination(%+v, %+v) = true", a, b)
			}
		})
	}
	if !EqualDestination(a, a) {
		t.Errorf("EqualDestination(a, a) = false")
	}
}

func TestSettingsValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		s    Settings
		want string // empty: valid
	}{
		"valid":               {s: settings},
		"valid with oci://":   {s: Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "oci://registry.example.com/aicr"}},
		"valid with a port":   {s: Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "localhost:5000/aicr"}},
		"no engine namespace": {s: Settings{Project: "aicr", Repository: "r.example.com/aicr"}, want: "engine namespace is required"},
		"no project":          {s: Settings{EngineNamespace: "argocd", Repository: "r.example.com/aicr"}, want: "engine project is required"},
		"no repository":       {s: Settings{EngineNamespace: "argocd", Project: "aicr"}, want: `registry repository "": use host[:port]/path without a trailing slash, such as registry.example.com/aicr`},
		"only the scheme":     {s: Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "oci://"}, want: `registry repository "oci://": use host[:port]/path`},
		"a trailing slash":    {s: Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "r.example.com/aicr/"}, want: "without a trailing slash"},
		"an https repository": {s: Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "https://r.example.com/aicr"}, want: `registry repository "https://r.example.com/aicr": only oci:// is supported`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
