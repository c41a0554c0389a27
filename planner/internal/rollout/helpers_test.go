package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// comp is a test component: name, chart digest seed, dependencies.
type comp struct {
	name string
	ver  int
	deps []string
	gate bool
}

// mkPlan resolves a plan from components.
func mkPlan(t testing.TB, comps ...comp) *plan.Plan {
	t.Helper()
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "stack", Version: "1.0.0"}}
	for _, c := range comps {
		b.Components = append(b.Components, plan.Component{
			Name: c.name, Namespace: c.name, DependsOn: c.deps, ReadinessGate: c.gate,
			Chart:  plan.ChartRef{Path: "charts/" + c.name, Digest: fmt.Sprintf("sha256:%064x", c.ver+1)},
			Values: json.RawMessage(`{"v":1}`),
		})
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return p
}

// diamond is cert-manager at the bottom, nfd and prometheus on it, gpu-operator on both,
// network-operator on nfd, and a readiness gate on gpu-operator.
func diamond(ver map[string]int) []comp {
	return []comp{
		{name: "cert-manager", ver: ver["cert-manager"]},
		{name: "nfd", ver: ver["nfd"], deps: []string{"cert-manager"}},
		{name: "prometheus", ver: ver["prometheus"], deps: []string{"cert-manager"}},
		{name: "gpu-operator", ver: ver["gpu-operator"], deps: []string{"nfd", "prometheus"}},
		{name: "network-operator", ver: ver["network-operator"], deps: []string{"nfd"}},
		{name: "gpu-gate", ver: ver["gpu-gate"], deps: []string{"gpu-operator"}, gate: true},
	}
}

// newRollout builds an initialized rollout from two plans.
func newRollout(t testing.TB, from, to *plan.Plan, opts plan.StepOptions) *v1alpha1.RuntimeRollout {
	t.Helper()
	fd, td := "", ""
	if from != nil {
		fd = from.Digest()
	}
	if to != nil {
		td = to.Digest()
	}
	deadline := metav1.NewTime(t0.Add(DefaultDeadline))
	r := &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: Name(fd, td)},
		Spec:       v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", FromDigest: fd, ToDigest: td, Deadline: &deadline},
	}
	Initialize(r, plan.Steps(from, to, opts))
	return r
}

func env(now time.Time) Env {
	return Env{Now: now, Identities: []string{"system:serviceaccount:aicr-system:aicr-planner"}}
}

func ready(r *v1alpha1.RuntimeRollout, index int32) *bus.ReleaseVerdict {
	s := Step(r, index)
	return &bus.ReleaseVerdict{Runtime: "cluster", Release: s.Release, StepID: v1alpha1.StepID(r.Name, index), PlanDigest: r.Spec.ToDigest, Ready: true}
}

func result(r *v1alpha1.RuntimeRollout, index int32, outcome string) *bus.ApplyResult {
	s := Step(r, index)
	return &bus.ApplyResult{Runtime: "cluster", Release: s.Release, Outcome: outcome, Step: bus.StepRef{Rollout: r.Name, Index: index, ID: v1alpha1.StepID(r.Name, index)}}
}

// started names the releases of Start entries, "release(Action)".
func started(r *v1alpha1.RuntimeRollout, ss []Start) []string {
	var out []string
	for _, s := range ss {
		st := Step(r, s.Index)
		out = append(out, st.Release+"("+string(st.Action)+")")
	}
	return out
}

func states(r *v1alpha1.RuntimeRollout) string {
	var b strings.Builder
	for _, s := range r.Status.Steps {
		fmt.Fprintf(&b, "%s=%s ", s.Release, s.State)
	}
	return strings.TrimSpace(b.String())
}

func approve(r *v1alpha1.RuntimeRollout, by string, expires *time.Time) {
	r.Spec.Approval = &v1alpha1.Approval{ApprovedBy: by, Reason: "remove the old component"}
	if expires != nil {
		e := metav1.NewTime(*expires)
		r.Spec.Approval.ExpiresAt = &e
	}
}
