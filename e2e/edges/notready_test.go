//go:build e2e

package edges

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// "NotReady: a release of the active plan is no longer ready": after RolledOut, a release
// whose pod stops running (the node cordoned, the pod deleted: the new one cannot be
// scheduled) turns Progressing in Argo CD, and the runtime turns Ready=False/NotReady naming
// the release and the open fence (kubectl aicr describe shows it), without an Application
// write; it is Ready=True again on its own once the release recovers. Meanwhile the chart's
// alert rules, evaluated over the binaries' series, fire AicrComponentNotReady for that release
// and fence, and nothing once it is ready again.
func TestReleaseThatStopsBeingReadyMakesTheRuntimeNotReady(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	const rel, ns = "jobset", "jobset-system"
	apps := stacktest.Record(t, s, testenv.ApplicationGVR, stack.EngineNamespace)
	before := stacktest.Application(t, s, rel)

	uncordon := unschedule(t, s, ns, rel)

	got, err := s.WaitCondition(ctx, promptTimeout, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotReady)
	if err != nil {
		t.Fatal(err)
	}
	c := stacktest.Condition(got, v1alpha1.ConditionReady)
	if !has(c.Message, "release "+rel+" is not ready", v1alpha1.FenceHealthy+" Open", rt.Status.ActivePlan) {
		t.Errorf("Ready message %q does not name %s, its open Healthy fence and the plan", c.Message, rel)
	}
	t.Logf("Ready=False NotReady: %s", c.Message)
	// The alerts over what the binaries export now: the release and its open fence, and
	// nothing else (not a stall, no binary down).
	stacktest.CheckAlerts(t, s, stacktest.Alert{Name: "AicrComponentNotReady", Labels: map[string]string{
		"runtime": rt.Name, "release": rel, "fence": v1alpha1.FenceHealthy, "state": string(v1alpha1.FenceOpen)}})
	if got.Status.ActivePlan != rt.Status.ActivePlan || got.Status.Rollout != rt.Status.Rollout {
		t.Errorf("the runtime moved: plan %s, rollout %s", got.Status.ActivePlan, got.Status.Rollout)
	}
	if c := stacktest.Condition(got, v1alpha1.ConditionStalled); c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled=%s %s: a release not ready is not a stall", c.Status, c.Reason)
	}
	out, err := s.KubectlAICR(ctx, "describe")
	if err != nil {
		t.Fatal(err)
	}
	if !has(out, "Releases not ready since their rollout", rel+" (step ", "[ ] Healthy") {
		t.Errorf("kubectl aicr describe does not show %s with its open fence:\n%s", rel, out)
	}

	uncordon()
	back, err := s.WaitCondition(ctx, stepTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.ActivePlan != rt.Status.ActivePlan {
		t.Errorf("active plan %s after recovery, want %s", back.Status.ActivePlan, rt.Status.ActivePlan)
	}
	stacktest.CheckAlerts(t, s) // ready again: no alert fires

	// No Application write followed: the operator's field managers wrote nothing to it.
	ours := func(es []metav1.ManagedFieldsEntry) []string {
		var out []string
		for _, e := range es {
			if strings.HasPrefix(e.Manager, v1alpha1.FieldManager) {
				out = append(out, e.Manager+"/"+string(e.Operation)+"@"+e.Time.UTC().String())
			}
		}
		return out
	}
	want := ours(before.ManagedFields)
	for _, e := range apps.Of(t, rel) {
		app, err := stacktest.DecodeApplication(e.Object)
		if err != nil {
			t.Fatal(err)
		}
		if got := ours(app.ManagedFields); !slices.Equal(got, want) || app.Annotations[v1alpha1.AnnotationStep] != before.Annotations[v1alpha1.AnnotationStep] {
			t.Errorf("the Application was written by the operator at rv %d: managers %v (before %v), step %s", e.RV, got, want, app.Annotations[v1alpha1.AnnotationStep])
			break
		}
	}
}
