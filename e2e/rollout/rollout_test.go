//go:build e2e

package rollout

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
)

// The example bundle rolls out to Ready; every step starts only after the steps of its
// dependencies finished (the DAG), each release's Application has the shape of docs/argocd.md,
// and the readiness gate was synced by an operation initiated by aicr-operator.
func TestExampleBundleRollsOutInDependencyOrder(t *testing.T) {
	s := stacktest.Need(t)
	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	rt := stacktest.RolledOut(t, s, bundle, stack.DefaultRuntimeSpec())
	ro, err := s.Rollout(t.Context(), rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ro.Status.Steps), len(stack.ExampleComponents()); got != want {
		t.Fatalf("rollout %s has %d steps, want one per component (%d)", ro.Name, got, want)
	}
	finished := map[string]metav1.Time{}
	for _, st := range ro.Status.Steps {
		if st.State != v1alpha1.StepSucceeded || st.StartedAt == nil || st.FinishedAt == nil {
			t.Fatalf("step %d %s: state %s, started %v, finished %v", st.Index, st.Release, st.State, st.StartedAt, st.FinishedAt)
		}
		finished[st.Release] = *st.FinishedAt
	}
	for _, c := range stack.ExampleComponents() {
		var step v1alpha1.Step
		for _, st := range ro.Status.Steps {
			if st.Release == c.Name {
				step = st
			}
		}
		for _, d := range c.DependsOn {
			if step.StartedAt.Before(ptr(finished[d])) {
				t.Errorf("%s started at %s, before its dependency %s finished at %s", c.Name, step.StartedAt, d, finished[d].Time)
			}
		}
	}

	for _, c := range stack.ExampleComponents() {
		app := stacktest.Application(t, s, c.Name)
		if got := app.Labels[v1alpha1.LabelManagedBy]; got != v1alpha1.ManagedByValue {
			t.Errorf("%s: label %s = %q", c.Name, v1alpha1.LabelManagedBy, got)
		}
		if got := app.Annotations[v1alpha1.AnnotationRuntimeUID]; got != string(rt.UID) {
			t.Errorf("%s: runtime-uid %q, want %q", c.Name, got, rt.UID)
		}
		deps := slices.Clone(c.DependsOn)
		slices.Sort(deps)
		if got := app.Annotations[v1alpha1.AnnotationDependsOn]; got != strings.Join(deps, ",") {
			t.Errorf("%s: depends-on %q, want %q", c.Name, got, strings.Join(deps, ","))
		}
		src := app.Spec.Source
		if src == nil || src.RepoURL != appspec.RepoURL(s.Repository, c.Dir+"/"+c.Name) || src.Path != "." || src.TargetRevision != s.Digests[c.Name] {
			t.Errorf("%s: source %+v", c.Name, src)
		}
		sp := app.Spec.SyncPolicy
		if sp == nil || sp.Automated == nil || !stacktest.True(sp.Automated.Prune) || !stacktest.True(sp.Automated.SelfHeal) || sp.Automated.Enabled == nil || !*sp.Automated.Enabled {
			t.Errorf("%s: automated sync policy %+v", c.Name, sp)
		}
		if sp != nil && (slices.Contains(sp.SyncOptions, "CreateNamespace=true") || !slices.Contains(sp.SyncOptions, "ServerSideApply=true") ||
			!slices.Contains(sp.SyncOptions, "RespectIgnoreDifferences=true")) {
			t.Errorf("%s: sync options %v", c.Name, sp.SyncOptions)
		}
		// The retry and backoff values and the comparison exceptions as Argo CD holds them on
		// the live Application, after its controller reconciled it (docs/argocd.md).
		if sp == nil {
			t.Errorf("%s: no sync policy", c.Name)
		} else if d := cmp.Diff(appspec.Retry(), sp.Retry); d != "" {
			t.Errorf("%s: retry (-want +live):\n%s", c.Name, d)
		}
		if d := cmp.Diff(appspec.IgnoreDifferences(), app.Spec.IgnoreDifferences); d != "" {
			t.Errorf("%s: ignoreDifferences (-want +live):\n%s", c.Name, d)
		}
		if slices.Contains(app.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
			t.Errorf("%s: carries the resources finalizer outside a Remove step", c.Name)
		}
		if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != s.Digests[c.Name] {
			t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", c.Name, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, s.Digests[c.Name])
		}
		if c.ReadinessGate {
			op := app.Status.OperationState
			if op == nil || op.Operation.InitiatedBy.Username != v1alpha1.FieldManager || op.Phase != "Succeeded" {
				t.Errorf("%s: the gate's last operation %+v was not a succeeded sync initiated by %s", c.Name, op, v1alpha1.FieldManager)
			}
		}
	}
}

func ptr(t metav1.Time) *metav1.Time { return &t }
