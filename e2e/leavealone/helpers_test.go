//go:build e2e

package leavealone

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. A repair is one drift report, one command and one apply; Argo CD then syncs a
// small chart in a few seconds. A Blocked or Foreign step is retried once a minute.
const (
	repairTimeout  = 2 * time.Minute
	syncTimeout    = 2 * time.Minute
	stallTimeout   = 2 * time.Minute
	retryTimeout   = 3 * time.Minute // the minute between retries, then the step and its sync
	selfHealTimout = 2 * time.Minute
)

// eventNamespace is where the planner records Events about the cluster-scoped ClusterRuntime:
// the operator namespace.
const eventNamespace = stack.OperatorNamespace

// The bundle the runtime points at: the example, as the tests change it. Tests run in order and
// each leaves the runtime Ready at this bundle.
var (
	components = stack.ExampleComponents()
	version    = 1
)

// applyBundle renders the package's bundle as a new version and writes the bundle ConfigMap.
func applyBundle(t *testing.T, s *stack.Stack) {
	t.Helper()
	version++
	raw, err := stack.BundleYAML("gpu-stack", fmt.Sprintf("1.0.%d", version), components, s.Digests)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(t.Context(), raw); err != nil {
		t.Fatal(err)
	}
}

// rolledOut rolls the package's bundle out with the default spec (or checks it still is) and
// returns the Ready runtime.
func rolledOut(t *testing.T, s *stack.Stack) *v1alpha1.ClusterRuntime {
	t.Helper()
	raw, err := stack.BundleYAML("gpu-stack", fmt.Sprintf("1.0.%d", version), components, s.Digests)
	if err != nil {
		t.Fatal(err)
	}
	return stacktest.RolledOut(t, s, raw, stack.DefaultRuntimeSpec())
}

// syncedHealthy reports whether Argo CD compared the Application's current spec and found it
// Synced and Healthy at its pinned digest.
func syncedHealthy(app *argoapp.Application) bool {
	st := app.Status
	return appspec.EqualSource(&st.Sync.ComparedTo.Source, app.Spec.Source) &&
		appspec.EqualDestination(st.Sync.ComparedTo.Destination, app.Spec.Destination) &&
		st.Sync.Status == argoapp.SyncStatusCodeSynced && st.Health.Status == "Healthy" &&
		app.Spec.Source != nil && st.Sync.Revision == app.Spec.Source.TargetRevision
}

// automatedOn reports whether automated sync is stated and enabled.
func automatedOn(app *argoapp.Application) bool {
	sp := app.Spec.SyncPolicy
	return sp != nil && sp.Automated != nil && sp.Automated.Enabled != nil && *sp.Automated.Enabled
}

// owns reports whether manager's managedFields entry mentions field (such as "f:logLevel").
func owns(app *argoapp.Application, manager, field string) bool {
	for _, e := range app.ManagedFields {
		if e.Manager == manager && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"`+field+`"`) {
			return true
		}
	}
	return false
}

// specJSON is an Application's spec as JSON, for comparing before and after.
func specJSON(t *testing.T, app *argoapp.Application) string {
	t.Helper()
	raw, err := json.Marshal(app.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// markEvents returns the Events that exist now in the planner's Event namespace: name to
// resourceVersion (client-go's recorder counts a repeated Event on the existing one).
func markEvents(t *testing.T, s *stack.Stack) map[string]string {
	t.Helper()
	list, err := s.Kube.CoreV1().Events(eventNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	seen := map[string]string{}
	for _, e := range list.Items {
		seen[e.Name] = e.ResourceVersion
	}
	return seen
}

// waitEvent waits for a new Event (not in seen, or counted again since) about the ClusterRuntime
// with reason whose message contains every one of parts, and returns its message.
func waitEvent(t *testing.T, s *stack.Stack, seen map[string]string, timeout time.Duration, reason string, parts ...string) string {
	t.Helper()
	var msg string
	var others []string
	err := testenv.WaitFor(t.Context(), timeout, "event "+reason+" "+strings.Join(parts, " "), func(ctx context.Context) (bool, error) {
		list, err := s.Kube.CoreV1().Events(eventNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		others = others[:0]
	events:
		for _, e := range list.Items {
			if seen[e.Name] == e.ResourceVersion || e.InvolvedObject.Kind != "ClusterRuntime" || e.InvolvedObject.Name != v1alpha1.RuntimeName {
				continue
			}
			if e.Reason != reason {
				others = append(others, e.Reason+": "+e.Message)
				continue
			}
			for _, p := range parts {
				if !strings.Contains(e.Message, p) {
					others = append(others, e.Reason+": "+e.Message)
					continue events
				}
			}
			msg = e.Message
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v\nnew events about the runtime: %q", err, others)
	}
	return msg
}

// inFlight waits for the rollout to the plan the runtime desires to exist, not yet ended.
func inFlight(t *testing.T, s *stack.Stack, timeout time.Duration) *v1alpha1.RuntimeRollout {
	t.Helper()
	var ro *v1alpha1.RuntimeRollout
	err := testenv.WaitFor(t.Context(), timeout, "a rollout to the desired plan in flight", func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		if rt.Status.DesiredPlan == "" || rt.Status.DesiredPlan == rt.Status.ActivePlan || rt.Status.Rollout == "" {
			return false, nil
		}
		r, err := s.Rollout(ctx, rt.Status.Rollout)
		if err != nil {
			return false, err
		}
		ro = r
		return r.Spec.ToDigest == rt.Status.DesiredPlan && r.Status.Phase != "" && r.Status.Outcome == "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

// stepOf returns the rollout's step for release.
func stepOf(t *testing.T, ro *v1alpha1.RuntimeRollout, release string) v1alpha1.Step {
	t.Helper()
	for _, st := range ro.Status.Steps {
		if st.Release == release {
			return st
		}
	}
	t.Fatalf("rollout %s has no step for %s (steps %+v)", ro.Name, release, ro.Status.Steps)
	return v1alpha1.Step{}
}

// gone waits until the Application is not found.
func gone(t *testing.T, s *stack.Stack, name string, timeout time.Duration) {
	t.Helper()
	err := testenv.WaitFor(t.Context(), timeout, "application "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := stacktest.Applications(s).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// equalJSON reports whether two values are the same once encoded (numbers compare as numbers).
func equalJSON(a, b any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ra, &x)
	_ = json.Unmarshal(rb, &y)
	return reflect.DeepEqual(x, y)
}

// createApp creates an Application as a person (not the operator) and returns what was stored.
func createApp(t *testing.T, s *stack.Stack, app *argoapp.Application) *argoapp.Application {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		t.Fatal(err)
	}
	delete(obj, "status") // Argo CD's to write
	u, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(app.Namespace).
		Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: stacktest.Person})
	if err != nil {
		t.Fatalf("create application %s: %v", app.Name, err)
	}
	out, err := stacktest.DecodeApplication(u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
