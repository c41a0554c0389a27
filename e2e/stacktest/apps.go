package stacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Person is the field manager of every hand edit of the e2e tests: someone who is not the
// operator, so the operator's field ownership and drift reports can be told apart from theirs.
const Person = "e2e-person"

// Applications is the Application API of the stack's engine namespace.
func Applications(s *stack.Stack) dynamic.ResourceInterface {
	return s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace)
}

// PatchApp edits an Application by hand (a JSON merge patch, field manager Person) and returns
// what was stored.
func PatchApp(t *testing.T, s *stack.Stack, name, patch string) *argoapp.Application {
	t.Helper()
	u, err := Applications(s).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: Person})
	if err != nil {
		t.Fatalf("hand edit of application %s (%s): %v", name, patch, err)
	}
	app, err := DecodeApplication(u)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// WaitApp waits until the Application exists and cond holds, and returns it; on timeout the
// test fails with the Application as last seen (DescribeApp).
func WaitApp(t *testing.T, s *stack.Stack, name string, timeout time.Duration, what string, cond func(*argoapp.Application) bool) *argoapp.Application {
	t.Helper()
	var last *argoapp.Application
	err := testenv.WaitFor(t.Context(), timeout, "application "+name+" "+what, func(ctx context.Context) (bool, error) {
		u, err := Applications(s).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if last, err = DecodeApplication(u); err != nil {
			return false, err
		}
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("%v\nlast seen: %s", err, DescribeApp(last))
	}
	return last
}

// DescribeApp is a one-line account of an Application for failure messages: what the tests
// wait on (comparison, sync operation, values, automated sync, finalizers, the step that wrote
// it).
func DescribeApp(app *argoapp.Application) string {
	if app == nil {
		return "never read"
	}
	vals := "{}"
	if src := app.Spec.Source; src != nil && src.Helm != nil && src.Helm.ValuesObject != nil {
		vals = string(src.Helm.ValuesObject.Raw)
	}
	op := "none"
	if os := app.Status.OperationState; os != nil {
		op = string(os.Phase)
	}
	auto := "absent"
	if sp := app.Spec.SyncPolicy; sp != nil && sp.Automated != nil && sp.Automated.Enabled != nil {
		auto = fmt.Sprint(*sp.Automated.Enabled)
	}
	return fmt.Sprintf("uid %s rv %s, %s/%s at %s, operation %s, values %s, automated.enabled %s, finalizers %v, step %s (%s)",
		app.UID, app.ResourceVersion, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, op, vals, auto,
		app.Finalizers, app.Annotations[v1alpha1.AnnotationStep], app.Annotations[v1alpha1.AnnotationStepWrite])
}

// Values decodes a source's Helm values ({} when it has none).
func Values(t *testing.T, src *argoapp.ApplicationSource) map[string]any {
	t.Helper()
	out := map[string]any{}
	if src != nil && src.Helm != nil && src.Helm.ValuesObject != nil {
		if err := json.Unmarshal(src.Helm.ValuesObject.Raw, &out); err != nil {
			t.Fatalf("decode values: %v", err)
		}
	}
	return out
}

// SetValue sets a top-level value of a component among components (a test package's bundle,
// as its tests change it).
func SetValue(t *testing.T, components []stack.ExampleComponent, component, key string, value any) {
	t.Helper()
	for i := range components {
		if components[i].Name == component {
			components[i].Values[key] = value
			return
		}
	}
	t.Fatalf("no component %s in the bundle", component)
}

// Condition returns a condition of the runtime, or a zero one of that type.
func Condition(rt *v1alpha1.ClusterRuntime, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(rt.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ}
}

// StepOf returns the rollout's step for release, failing the test when there is none or its
// action differs.
func StepOf(t *testing.T, ro *v1alpha1.RuntimeRollout, release string, action v1alpha1.StepAction) v1alpha1.Step {
	t.Helper()
	st, ok := FindStep(ro, release)
	if !ok {
		t.Fatalf("rollout %s has no step for %s (steps: %s)", ro.Name, release, DescribeSteps(ro))
	}
	if st.Action != action {
		t.Fatalf("rollout %s: step %d %s is %s, want %s", ro.Name, st.Index, release, st.Action, action)
	}
	return st
}

// DescribeSteps is a rollout's steps on one line, for failure messages.
func DescribeSteps(ro *v1alpha1.RuntimeRollout) string {
	out := ""
	for _, st := range ro.Status.Steps {
		out += fmt.Sprintf("[%d %s %s %s %s] ", st.Index, st.Release, st.Action, st.State, st.Reason)
	}
	return out
}
