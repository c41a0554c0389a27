package view

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

func rolling() (*v1alpha1.ClusterRuntime, *v1alpha1.RuntimeRollout) {
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: v1alpha1.ClusterRuntimeStatus{
		Rollout: "r-1", DesiredPlan: "sha256:bb", ActivePlan: "sha256:aa",
		Conditions: []metav1.Condition{{Type: "Ready", Status: "False", Reason: "RollingOut", Message: "step 2/3 gpu-operator (Upgrade)", LastTransitionTime: *at(time.Minute)}},
	}}
	ro := &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Status: v1alpha1.RuntimeRolloutStatus{
		Phase: v1alpha1.PhaseProgressing, StartedAt: at(90 * time.Second),
		Steps: []v1alpha1.Step{
			{Index: 1, Release: "nfd", Action: "Install", State: "Succeeded", StartedAt: at(90 * time.Second), FinishedAt: at(70 * time.Second)},
			{Index: 2, Release: "gpu-operator", Action: "Upgrade", State: "InProgress", StartedAt: at(65 * time.Second), DependsOn: []string{"nfd"},
				Verdict: &v1alpha1.Verdict{Fences: []v1alpha1.Fence{{Name: "ComparedToSpec", State: "Passed"}, {Name: "Healthy", State: "Open", Message: "Progressing"}}}},
			{Index: 3, Release: "dcgm-exporter", Action: "Remove", State: "AwaitingApproval"},
		},
	}}
	return rt, ro
}

func TestStatusScreen(t *testing.T) {
	rt, ro := rolling()
	got := strings.Join(StatusScreen(rt, ro, now, style.Style{}), "\n")
	for _, want := range []string{
		"runtime cluster  Ready=False RollingOut: step 2/3 gpu-operator (Upgrade)  (since 60s ago)",
		"desired plan: sha256:bb",
		"rollout r-1  Progressing  elapsed 1m30s",
		"[##########--------------------] 1/3 steps succeeded",
		"✓ 1 nfd           Install Succeeded           20s",
		"● 2 gpu-operator  Upgrade InProgress        1m05s",
		"      [ ] Healthy: Progressing",
		"? 3 dcgm-exporter Remove  AwaitingApproval",
		"awaits approval: kubectl aicr approve r-1 --reason TEXT",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("screen lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ComparedToSpec") {
		t.Errorf("a passed fence is listed:\n%s", got)
	}
}

func TestScreensEscapeTheCluster(t *testing.T) {
	rt, ro := rolling()
	ro.Status.Steps[1].Verdict.Fences[1].Message = "\x1b[2Jgone"
	got := strings.Join(StatusScreen(rt, ro, now, style.Style{}), "\n")
	if strings.Contains(got, "\x1b") || !strings.Contains(got, "^[[2Jgone") {
		t.Errorf("a message reaches the terminal unescaped:\n%q", got)
	}
}

func TestChangesPrintOneLinePerChange(t *testing.T) {
	rt, ro := rolling()
	c := NewChanges()
	first := c.Lines(true, rt, ro, now)
	if len(first) != 6 {
		t.Fatalf("first observation: %d lines, want runtime, plans, rollout and three steps:\n%s", len(first), strings.Join(first, "\n"))
	}
	if again := c.Lines(true, rt, ro, now.Add(time.Minute)); len(again) != 0 {
		t.Errorf("nothing changed but time, yet: %q", again)
	}
	ro.Status.Steps[1].State, ro.Status.Steps[1].FinishedAt = v1alpha1.StepSucceeded, at(0)
	got := c.Lines(true, rt, ro, now)
	want := []string{
		"03:04:05 rollout r-1: Progressing, 2/3 steps succeeded, step 3/3 dcgm-exporter (Remove)",
		"03:04:05 step 2/3 gpu-operator (Upgrade) Succeeded in 1m05s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after a step succeeded (-want +got):\n%s", diff)
	}
	if got := c.Lines(true, nil, nil, now); len(got) != 1 || !strings.Contains(got[0], "clusterruntime cluster: not found yet") {
		t.Errorf("runtime deleted: %q", got)
	}
}
