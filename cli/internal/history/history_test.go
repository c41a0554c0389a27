package history

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

var (
	planA = "sha256:" + strings.Repeat("a", 64)
	planB = "sha256:" + strings.Repeat("b", 64)
)

func rollout(name, outcome string, phase v1alpha1.RolloutPhase) *v1alpha1.RuntimeRollout {
	return &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "uid-1", FromDigest: planA, ToDigest: planB},
		Status:     v1alpha1.RuntimeRolloutStatus{Outcome: outcome, Phase: phase},
	}
}

func runtimeAt(rollout, desired string) *v1alpha1.ClusterRuntime {
	return &v1alpha1.ClusterRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "uid-1"},
		Status:     v1alpha1.ClusterRuntimeStatus{Rollout: rollout, DesiredPlan: desired, ActivePlan: planA},
	}
}

func TestRetryable(t *testing.T) {
	other := runtimeAt("r-1", planB)
	other.UID = "uid-2"
	for _, c := range []struct {
		name string
		ro   *v1alpha1.RuntimeRollout
		rt   *v1alpha1.ClusterRuntime
		want string // "" : may be retried
	}{
		{"failed", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), runtimeAt("r-1", planB), ""},
		{"expired", rollout("r-1", v1alpha1.OutcomeExpired, v1alpha1.PhaseExpired), runtimeAt("r-1", planB), ""},
		{"failed, desired plan not yet reported", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), runtimeAt("r-1", ""), ""},
		{"in flight", rollout("r-1", "", v1alpha1.PhaseProgressing), runtimeAt("r-1", planB), "still in flight (phase Progressing)"},
		{"new", rollout("r-1", "", ""), runtimeAt("r-1", planB), "still in flight (phase Pending)"},
		{"succeeded", rollout("r-1", v1alpha1.OutcomeSucceeded, v1alpha1.PhaseSucceeded), runtimeAt("r-1", planB), "succeeded: there is nothing to retry"},
		{"revoked", rollout("r-1", v1alpha1.OutcomeRevoked, v1alpha1.PhaseRevoked), runtimeAt("r-1", planB), "a person revoked its approval"},
		{"superseded", rollout("r-1", v1alpha1.OutcomeSuperseded, v1alpha1.PhaseSuperseded), runtimeAt("r-1", planB), "ended RolloutSuperseded: only a rollout that ended RolloutFailed or RolloutExpired"},
		{"runtime gone", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), nil, "clusterruntime cluster is gone"},
		{"earlier runtime", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), other, "belongs to an earlier clusterruntime"},
		{"not current", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), runtimeAt("r-2", planB), "not the runtime's current rollout (r-2 is)"},
		{"runtime wants another plan", rollout("r-1", v1alpha1.OutcomeFailed, v1alpha1.PhaseFailed), runtimeAt("r-1", planA), "the runtime now wants plan " + planA},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Retryable(c.ro, c.rt)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Retryable: %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Retryable: %v, want %q", err, c.want)
			}
		})
	}
}

func TestEntries(t *testing.T) {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	inFlight := rollout("r-3", "", v1alpha1.PhaseProgressing)
	inFlight.Spec.FromDigest, inFlight.Spec.ToDigest = planB, planA
	inFlight.Status.StartedAt = at(-30 * time.Second)
	inFlight.Status.StepCounts = &v1alpha1.StepCounts{Total: 4, Succeeded: 1}
	back := rollout("r-2", v1alpha1.OutcomeSucceeded, v1alpha1.PhaseSucceeded)
	back.Spec.FromDigest, back.Spec.ToDigest = planB, planA
	back.Status.StartedAt, back.Status.FinishedAt = at(-10*time.Minute), at(-8*time.Minute)
	back.Spec.Approval = &v1alpha1.Approval{ApprovedBy: "alice", Revoked: &v1alpha1.Revocation{RevokedBy: "bob"}}
	first := rollout("r-1", v1alpha1.OutcomeSucceeded, v1alpha1.PhaseSucceeded)
	first.Spec.FromDigest, first.Spec.ToDigest = "", planA
	first.Status.Steps = []v1alpha1.Step{{State: v1alpha1.StepSucceeded}, {State: v1alpha1.StepFailed}}

	got := Entries([]*v1alpha1.RuntimeRollout{inFlight, back, first}, runtimeAt("r-3", planA), now)
	if len(got) != 3 {
		t.Fatalf("%d entries", len(got))
	}
	// Only the newest success to the active plan put it in place.
	if !got[1].Active || got[0].Active || got[2].Active {
		t.Errorf("active: %v %v %v, want only r-2", got[0].Active, got[1].Active, got[2].Active)
	}
	if !got[0].Current || got[1].Current {
		t.Errorf("current: %v %v, want r-3", got[0].Current, got[1].Current)
	}
	if got[0].DurationSeconds != 30 || got[0].Finished != nil || got[1].DurationSeconds != 120 {
		t.Errorf("durations %v (finished %v), %v; want 30 so far, 120", got[0].DurationSeconds, got[0].Finished, got[1].DurationSeconds)
	}
	if got[0].Steps != "1/4" || got[2].Steps != "1/2" {
		t.Errorf("steps %q %q, want 1/4 (from the counts) and 1/2 (from the steps)", got[0].Steps, got[2].Steps)
	}
	if got[1].ApprovedBy != "alice" || got[1].RevokedBy != "bob" {
		t.Errorf("approval %q revoked %q", got[1].ApprovedBy, got[1].RevokedBy)
	}
	var b bytes.Buffer
	if err := Write(&b, got, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"* r-3", "bbbbbbbbbbbb  aaaaaaaaaaaa", "Progressing", "30s so far", "RolloutSucceeded (active)", "alice (revoked by bob)", "  2m\n", "none"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
