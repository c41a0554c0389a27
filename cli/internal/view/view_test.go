package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
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
