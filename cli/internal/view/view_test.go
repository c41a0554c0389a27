package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// describe lists the releases not ready since their rollout, with the open fences; a ready
// entry (kept by the planner to order late verdicts) is not shown.
func TestDescribeReleases(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-2 * time.Minute))
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: v1alpha1.ClusterRuntimeStatus{Releases: []v1alpha1.ReleaseHealth{
		{Release: "cert-manager", Ready: true, ResourceVersion: "10"},
		{Release: "nfd", Step: "r-a-none/2", Since: &since, ObservedAt: &since, Fences: []v1alpha1.Fence{
			{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Progressing: some resources are not healthy yet"},
		}},
	}}}
	var out bytes.Buffer
	if err := DescribeReleases(&out, rt, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Releases not ready since their rollout", "nfd (step r-a-none/2): not ready since 2026-01-01T11:58:00Z (2m ago)", "[ ] Healthy", "Progressing: some resources"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "cert-manager") {
		t.Errorf("a ready release is listed:\n%s", out.String())
	}
	out.Reset()
	rt.Status.Releases = rt.Status.Releases[:1]
	if err := DescribeReleases(&out, rt, now); err != nil || out.Len() != 0 {
		t.Errorf("every release ready: wrote %q (%v), want nothing", out.String(), err)
	}
}

// handEdited is the verdict readiness gives an Application edited by hand: the guard's cause on
// ComparedToSpec, repeated after "not judged: " by every later fence.
func handEdited(cause string) []v1alpha1.Fence {
	fs := []v1alpha1.Fence{{Name: v1alpha1.FenceComparedToSpec, State: v1alpha1.FenceOpen, Message: cause}}
	for _, n := range []string{v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep, v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition} {
		fs = append(fs, v1alpha1.Fence{Name: n, State: v1alpha1.FenceOpen, Message: v1alpha1.FenceNotJudged + ": " + cause})
	}
	return fs
}

// A hand edit's cause is said once, in status's blocking line and in describe's releases; the
// fences not judged because of it are named.
func TestAHandEditIsSaidOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-time.Minute))
	cause := "the Application's spec is not what plan sha256:b says; undo it, or change the runtime instead"
	ro := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Status: v1alpha1.RuntimeRolloutStatus{Steps: []v1alpha1.Step{
		{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: v1alpha1.StepInProgress, StartedAt: &since,
			Verdict: &v1alpha1.Verdict{Fences: handEdited(cause)}},
	}}}
	lines := Blocking(ro, now)
	if len(lines) != 1 || strings.Count(lines[0], cause) != 1 || !strings.Contains(lines[0], "not judged until then: SyncedAtRevision, SyncedAfterStep, Healthy, NoErrorCondition") {
		t.Errorf("blocking %q: want the cause once and the fences not judged by name", lines)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: v1alpha1.ClusterRuntimeStatus{Releases: []v1alpha1.ReleaseHealth{
		{Release: "gpu-operator", Since: &since, Fences: handEdited(cause)},
	}}}
	var out bytes.Buffer
	if err := DescribeReleases(&out, rt, now); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), cause); n != 1 || strings.Count(out.String(), "not judged (the cause is above)") != 4 {
		t.Errorf("describe's releases say the cause %d times, want once, and four fences not judged:\n%s", n, out.String())
	}
	out.Reset()
	if err := Describe(&out, ro, now); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), cause); n != 1 || strings.Count(out.String(), "not judged (the cause is above)") != 4 {
		t.Errorf("describe's step says the cause %d times, want once, and four fences not judged:\n%s", n, out.String())
	}
	screen := strings.Join(RolloutScreen(ro, now, style.Style{}), "\n")
	if n := strings.Count(screen, cause); n != 1 {
		t.Errorf("the live screen says the cause %d times, want once:\n%s", n, screen)
	}
}
