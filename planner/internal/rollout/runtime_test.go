package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// ro is a rollout of runtime uid-1 from one plan to another, in a phase.
func ro(name, from, to string, phase v1alpha1.RolloutPhase) v1alpha1.RuntimeRollout {
	return v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RuntimeRolloutSpec{RuntimeUID: "uid-1", FromDigest: from, ToDigest: to},
		Status:     v1alpha1.RuntimeRolloutStatus{Phase: phase},
	}
}

// withStep gives a rollout one step in state, started when state is not Pending.
func withStep(r v1alpha1.RuntimeRollout, state v1alpha1.StepState) *v1alpha1.RuntimeRollout {
	s := v1alpha1.Step{Index: 1, Release: "gpu-operator", Action: v1alpha1.ActionUpgrade, State: state}
	if state != v1alpha1.StepPending {
		s.StartedAt = mt(t0)
	}
	r.Status.Steps = []v1alpha1.Step{s}
	return &r
}

func names(rs []*v1alpha1.RuntimeRollout) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestWantsFinalizer(t *testing.T) {
	t.Parallel()
	for policy, want := range map[v1alpha1.DeletionPolicy]bool{
		v1alpha1.DeletionPolicyDelete: true, v1alpha1.DeletionPolicyRetain: false, "": false,
	} {
		rt := &v1alpha1.ClusterRuntime{Spec: v1alpha1.ClusterRuntimeSpec{DeletionPolicy: policy}}
		if got := WantsFinalizer(rt); got != want {
			t.Errorf("deletionPolicy %q: WantsFinalizer %v, want %v", policy, got, want)
		}
	}
}

func TestSortByCreation(t *testing.T) {
	t.Parallel()
	at := func(name string, sec int) v1alpha1.RuntimeRollout {
		return v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second))}}
	}
	rs := []v1alpha1.RuntimeRollout{at("r-c", 2), at("r-b", 1), at("r-a", 2), at("r-z", 0)}
	SortByCreation(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"r-z", "r-b", "r-a", "r-c"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestInFlight(t *testing.T) {
	t.Parallel()
	other := ro("r-other", "", "sha256:x", v1alpha1.PhaseProgressing)
	other.Spec.RuntimeUID = "uid-0"
	tests := map[string]struct {
		rollouts  []v1alpha1.RuntimeRollout
		want      string
		wantExtra []string
	}{
		"none": {want: ""},
		"ended rollouts are not in flight": {
			rollouts: []v1alpha1.RuntimeRollout{ro("r-1", "", "sha256:a", v1alpha1.PhaseSucceeded), ro("r-2", "sha256:a", "sha256:b", v1alpha1.PhaseFailed)},
		},
		"a rollout not yet initialized is in flight": {
			rollouts: []v1alpha1.RuntimeRollout{ro("r-1", "", "sha256:a", v1alpha1.PhaseSucceeded), ro("r-2", "sha256:a", "sha256:b", "")},
			want:     "r-2",
		},
		"an earlier runtime's rollout is ignored": {
			rollouts: []v1alpha1.RuntimeRollout{other, ro("r-2", "", "sha256:b", v1alpha1.PhasePending)},
			want:     "r-2",
		},
		"the first in order is in flight, later ones are extra": {
			rollouts: []v1alpha1.RuntimeRollout{
				ro("r-1", "", "sha256:a", v1alpha1.PhaseProgressing), ro("r-2", "", "sha256:b", v1alpha1.PhasePending),
				ro("r-3", "", "sha256:c", v1alpha1.PhaseStalled),
			},
			want: "r-1", wantExtra: []string{"r-2", "r-3"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			first, extra := InFlight(tc.rollouts, "uid-1")
			got := ""
			if first != nil {
				got = first.Name
			}
			if got != tc.want {
				t.Errorf("in flight %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantExtra, names(extra)); diff != "" {
				t.Errorf("extra (-want +got):\n%s", diff)
			}
		})
	}
}

// A planner that stopped after a rollout succeeded but before it wrote the runtime's active
// plan adopts that rollout's target on restart, even when an earlier rollout finished in the
// same second (finish times have one-second precision). Without that, the restarted planner
// recreated the succeeded rollout under the same name and waited forever for verdicts that
// readiness had already published (found by the chaos test).
func TestAdopt(t *testing.T) {
	t.Parallel()
	second := metav1.NewTime(time.Date(2026, 11, 30, 7, 17, 30, 0, time.UTC))
	later := metav1.NewTime(second.Add(time.Second))
	fin := func(name, from, to string, phase v1alpha1.RolloutPhase, at metav1.Time) v1alpha1.RuntimeRollout {
		r := ro(name, from, to, phase)
		r.Status.FinishedAt = &at
		return r
	}
	succeeded := func(name, from, to string) v1alpha1.RuntimeRollout {
		return fin(name, from, to, v1alpha1.PhaseSucceeded, second)
	}
	earlier := succeeded("r-e", "sha256:b", "sha256:e")
	earlier.Spec.RuntimeUID = "uid-0"
	earlier.Status.FinishedAt = &later
	old := Position{Plan: "sha256:b", EnginePolicy: ""}
	tests := map[string]struct {
		at       Position
		rollouts []v1alpha1.RuntimeRollout
		want     Position
	}{
		"two rollouts finished in the same second: the one from the active plan is adopted": {
			at:       Position{Plan: "sha256:b"},
			rollouts: []v1alpha1.RuntimeRollout{succeeded("r-b", "sha256:a", "sha256:b"), succeeded("r-c", "sha256:b", "sha256:c")},
			want:     Position{Plan: "sha256:c", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
		},
		"the same, listed the other way round": {
			at:       Position{Plan: "sha256:b"},
			rollouts: []v1alpha1.RuntimeRollout{succeeded("r-c", "sha256:b", "sha256:c"), succeeded("r-b", "sha256:a", "sha256:b")},
			want:     Position{Plan: "sha256:c", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
		},
		"the latest rollout was recorded already: nothing moves": {
			at:       Position{Plan: "sha256:c", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
			rollouts: []v1alpha1.RuntimeRollout{succeeded("r-b", "sha256:a", "sha256:b"), succeeded("r-c", "sha256:b", "sha256:c")},
			want:     Position{Plan: "sha256:c", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
		},
		"the latest finished rollout failed: nothing moves": {
			at: old,
			rollouts: []v1alpha1.RuntimeRollout{
				succeeded("r-c", "sha256:b", "sha256:c"), fin("r-d", "sha256:b", "sha256:d", v1alpha1.PhaseFailed, later),
			},
			want: old,
		},
		"a superseded rollout is no move": {
			at: old,
			rollouts: []v1alpha1.RuntimeRollout{
				succeeded("r-c", "sha256:b", "sha256:c"), fin("r-d", "sha256:b", "sha256:d", v1alpha1.PhaseSuperseded, later),
			},
			want: Position{Plan: "sha256:c", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
		},
		"an earlier runtime's rollout is ignored": {
			at:       old,
			rollouts: []v1alpha1.RuntimeRollout{earlier},
			want:     old,
		},
		"a rollout in flight has no finish time": {
			at:       old,
			rollouts: []v1alpha1.RuntimeRollout{ro("r-c", "sha256:b", "sha256:c", v1alpha1.PhaseProgressing)},
			want:     old,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Adopt(tc.rollouts, "uid-1", tc.at); got != tc.want {
				t.Errorf("Adopt = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPositionAfter(t *testing.T) {
	t.Parallel()
	at := Position{Plan: "sha256:a"}
	for phase, want := range map[v1alpha1.RolloutPhase]Position{
		v1alpha1.PhaseSucceeded:  {Plan: "sha256:b", EnginePolicy: v1alpha1.EnginePolicyArgoCDV2},
		v1alpha1.PhaseFailed:     at,
		v1alpha1.PhaseExpired:    at,
		v1alpha1.PhaseRevoked:    at,
		v1alpha1.PhaseSuperseded: at,
	} {
		r := ro("r-b-a", "sha256:a", "sha256:b", phase)
		if got := at.After(&r); got != want {
			t.Errorf("after %s: %+v, want %+v", phase, got, want)
		}
	}
}

func TestChooseTarget(t *testing.T) {
	t.Parallel()
	v2 := v1alpha1.EnginePolicyArgoCDV2
	started := withStep(ro("r-1", "", "sha256:a", v1alpha1.PhaseProgressing), v1alpha1.StepInProgress)
	pending := withStep(ro("r-1", "", "sha256:a", v1alpha1.PhasePending), v1alpha1.StepPending)
	tests := map[string]struct {
		in   TargetInputs
		want Target
	}{
		"first install": {
			in:   TargetInputs{Desired: "sha256:a"},
			want: Target{Move: true, To: "sha256:a", Reason: v1alpha1.RolloutReasonPlanChanged},
		},
		"plan changed": {
			in:   TargetInputs{Desired: "sha256:b", At: Position{Plan: "sha256:a", EnginePolicy: v2}},
			want: Target{Move: true, To: "sha256:b", Reason: v1alpha1.RolloutReasonPlanChanged},
		},
		"at the desired plan: nothing moves": {
			in:   TargetInputs{Desired: "sha256:a", At: Position{Plan: "sha256:a", EnginePolicy: v2}},
			want: Target{},
		},
		"spec does not resolve: nothing moves": {
			in:   TargetInputs{At: Position{Plan: "sha256:a", EnginePolicy: v2}},
			want: Target{},
		},
		"written by an older operator: every release again": {
			in:   TargetInputs{Desired: "sha256:a", At: Position{Plan: "sha256:a"}},
			want: Target{Move: true, To: "sha256:a", Reason: v1alpha1.RolloutReasonEnginePolicyChanged},
		},
		"a policy move carries a plan change": {
			in:   TargetInputs{Desired: "sha256:b", At: Position{Plan: "sha256:a", EnginePolicy: "argocd.v1"}},
			want: Target{Move: true, To: "sha256:b", Reason: v1alpha1.RolloutReasonEnginePolicyChanged},
		},
		"no policy move before the first install": {
			in:   TargetInputs{Desired: "sha256:a", At: Position{EnginePolicy: ""}},
			want: Target{Move: true, To: "sha256:a", Reason: v1alpha1.RolloutReasonPlanChanged},
		},
		"deleted with Delete: every release removed": {
			in:   TargetInputs{Deleting: true, DeletionPolicy: v1alpha1.DeletionPolicyDelete, At: Position{Plan: "sha256:a", EnginePolicy: v2}, InFlight: started},
			want: Target{Move: true, To: "", Reason: v1alpha1.RolloutReasonRuntimeDeleted},
		},
		"deleted with Retain: released at once, even mid-rollout": {
			in:   TargetInputs{Deleting: true, DeletionPolicy: v1alpha1.DeletionPolicyRetain, At: Position{Plan: "sha256:a", EnginePolicy: v2}, InFlight: started},
			want: Target{ReleaseFinalizer: true},
		},
		"deleted with Delete before anything was rolled out: released": {
			in:   TargetInputs{Deleting: true, DeletionPolicy: v1alpha1.DeletionPolicyDelete},
			want: Target{ReleaseFinalizer: true},
		},
		"deleted with Delete during a first install that has not started: released": {
			in:   TargetInputs{Deleting: true, DeletionPolicy: v1alpha1.DeletionPolicyDelete, InFlight: pending},
			want: Target{ReleaseFinalizer: true},
		},
		"deleted with Delete during a first install that started: wait for it": {
			in:   TargetInputs{Deleting: true, DeletionPolicy: v1alpha1.DeletionPolicyDelete, InFlight: started},
			want: Target{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ChooseTarget(tc.in); got != tc.want {
				t.Errorf("ChooseTarget = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReplace(t *testing.T) {
	t.Parallel()
	toB := Target{Move: true, To: "sha256:b", Reason: v1alpha1.RolloutReasonPlanChanged}
	removal := Target{Move: true, To: "", Reason: v1alpha1.RolloutReasonRuntimeDeleted}
	startedToB := withStep(ro("r-b", "sha256:a", "sha256:b", v1alpha1.PhaseProgressing), v1alpha1.StepInProgress)
	startedToC := withStep(ro("r-c", "sha256:a", "sha256:c", v1alpha1.PhaseProgressing), v1alpha1.StepBlocked)
	pendingToC := withStep(ro("r-c", "sha256:a", "sha256:c", v1alpha1.PhasePending), v1alpha1.StepPending)
	policyToB := withStep(ro("r-b", "sha256:a", "sha256:b", v1alpha1.PhaseProgressing), v1alpha1.StepInProgress)
	policyToB.Spec.Reason = v1alpha1.RolloutReasonEnginePolicyChanged
	removalOther := withStep(ro("r-none", "sha256:a", "", v1alpha1.PhasePending), v1alpha1.StepPending)
	removalOther.Spec.Reason = v1alpha1.RolloutReasonPlanChanged
	tests := map[string]struct {
		inflight    *v1alpha1.RuntimeRollout
		target      Target
		want        Replacement
		newer, wait string
	}{
		"nothing in flight":               {target: toB, want: KeepInFlight},
		"nothing moves":                   {inflight: startedToC, target: Target{}, want: KeepInFlight},
		"in flight to the target":         {inflight: startedToB, target: toB, want: KeepInFlight},
		"same plan, another reason: kept": {inflight: policyToB, target: toB, want: KeepInFlight},
		"not started: superseded":         {inflight: pendingToC, target: toB, want: SupersedeInFlight, newer: "sha256:b"},
		"started: the target waits": {inflight: startedToC, target: toB, want: WaitForInFlight,
			wait: "plan sha256:b waits for rollout r-c, which has started steps, to finish"},
		"removal supersedes one that has not started": {inflight: pendingToC, target: removal, want: SupersedeInFlight, newer: "(removal)"},
		"removal waits for one that started": {inflight: startedToC, target: removal, want: WaitForInFlight,
			wait: "the runtime's removal waits for rollout r-c, which has started steps, to finish"},
		"removal replaces a rollout to no plan with another reason": {inflight: removalOther, target: removal, want: SupersedeInFlight, newer: "(removal)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, newer, wait := Replace(tc.inflight, tc.target)
			if got != tc.want || newer != tc.newer || wait != tc.wait {
				t.Errorf("Replace = %v, %q, %q; want %v, %q, %q", got, newer, wait, tc.want, tc.newer, tc.wait)
			}
		})
	}
}

func TestReuseExisting(t *testing.T) {
	t.Parallel()
	mk := func(uid string, phase v1alpha1.RolloutPhase) *v1alpha1.RuntimeRollout {
		r := ro("r-b-a", "sha256:a", "sha256:b", phase)
		r.Spec.RuntimeUID = uid
		return &r
	}
	tests := map[string]struct {
		existing *v1alpha1.RuntimeRollout
		want     Reuse
	}{
		"none":                                 {want: CreateNew},
		"an earlier runtime's, even in flight": {existing: mk("uid-0", v1alpha1.PhaseProgressing), want: ReplaceEarlierRuntime},
		"an earlier runtime's that failed":     {existing: mk("uid-0", v1alpha1.PhaseFailed), want: ReplaceEarlierRuntime},
		"succeeded before":                     {existing: mk("uid-1", v1alpha1.PhaseSucceeded), want: ReplaceEnded},
		"superseded before":                    {existing: mk("uid-1", v1alpha1.PhaseSuperseded), want: ReplaceEnded},
		"failed":                               {existing: mk("uid-1", v1alpha1.PhaseFailed), want: KeepFailed},
		"expired":                              {existing: mk("uid-1", v1alpha1.PhaseExpired), want: KeepFailed},
		"revoked":                              {existing: mk("uid-1", v1alpha1.PhaseRevoked), want: KeepFailed},
		"in flight":                            {existing: mk("uid-1", v1alpha1.PhaseStalled), want: Resume},
		"created, not yet initialized":         {existing: mk("uid-1", ""), want: Resume},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ReuseExisting(tc.existing, "uid-1"); got != tc.want {
				t.Errorf("ReuseExisting = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	now := t0.Add(1500 * time.Millisecond)
	tests := map[string]struct {
		deadline *metav1.Duration
		want     time.Time
	}{
		"default deadline, truncated to the second": {want: t0.Add(time.Second + DefaultDeadline)},
		"spec.rollout.deadline":                     {deadline: &metav1.Duration{Duration: time.Hour}, want: t0.Add(time.Second + time.Hour)},
		"a zero deadline is the default":            {deadline: &metav1.Duration{}, want: t0.Add(time.Second + DefaultDeadline)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster", UID: "uid-1"}}
			rt.Spec.Rollout.Deadline = tc.deadline
			r := New(rt, "sha256:aaaaaaaaaaaa", "sha256:bbbbbbbbbbbb", v1alpha1.RolloutReasonPlanChanged, now)
			want := v1alpha1.RuntimeRolloutSpec{
				Runtime: "cluster", RuntimeUID: "uid-1", FromDigest: "sha256:aaaaaaaaaaaa", ToDigest: "sha256:bbbbbbbbbbbb",
				Reason: v1alpha1.RolloutReasonPlanChanged, Deadline: &metav1.Time{Time: tc.want},
			}
			if diff := cmp.Diff(want, r.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if r.Name != "r-bbbbbbbbbb-aaaaaaaaaa" || r.Labels[v1alpha1.LabelRuntime] != "cluster" || r.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
				t.Errorf("name %s, labels %v", r.Name, r.Labels)
			}
		})
	}
}

func TestKeepsStalledAndRemoved(t *testing.T) {
	t.Parallel()
	failed := ro("r-b-a", "sha256:a", "sha256:b", v1alpha1.PhaseFailed)
	policy := failed
	policy.Spec.Reason = v1alpha1.RolloutReasonEnginePolicyChanged
	stalls := map[string]struct {
		r    v1alpha1.RuntimeRollout
		at   Position
		want bool
	}{
		"the stack is not at its target":              {r: failed, at: Position{Plan: "sha256:a"}, want: true},
		"a later move got to its target":              {r: failed, at: Position{Plan: "sha256:b"}, want: false},
		"a failed policy move stalls at its plan too": {r: policy, at: Position{Plan: "sha256:b"}, want: true},
	}
	for name, tc := range stalls {
		if got := KeepsStalled(&tc.r, tc.at); got != tc.want {
			t.Errorf("%s: KeepsStalled %v, want %v", name, got, tc.want)
		}
	}
	inflight := withStep(ro("r-none-a", "sha256:a", "", v1alpha1.PhaseProgressing), v1alpha1.StepInProgress)
	removed := map[string]struct {
		inflight, last *v1alpha1.RuntimeRollout
		at             Position
		want           bool
	}{
		"every release removed":     {want: true},
		"the removal is in flight":  {inflight: inflight, at: Position{Plan: "sha256:a"}},
		"the removal failed":        {last: &failed, at: Position{Plan: "sha256:a"}},
		"a plan is still active":    {at: Position{Plan: "sha256:a"}},
		"a failed rollout holds it": {last: &failed},
	}
	for name, tc := range removed {
		if got := Removed(tc.inflight, tc.last, tc.at); got != tc.want {
			t.Errorf("%s: Removed %v, want %v", name, got, tc.want)
		}
	}
}

func TestEnvFor(t *testing.T) {
	t.Parallel()
	expires := t0.Add(time.Hour)
	tests := map[string]struct {
		spec   v1alpha1.ClusterRuntimeSpec
		engine *bus.EngineStatus
		creds  *bus.CredentialsStatus
		hold   string
	}{
		"nothing holds":           {engine: &bus.EngineStatus{Available: true}, creds: &bus.CredentialsStatus{OK: true}},
		"no engine report yet":    {creds: &bus.CredentialsStatus{OK: true}, hold: v1alpha1.ReasonEngineNotReported},
		"no credentials report":   {engine: &bus.EngineStatus{Available: true}},
		"paused before a report":  {spec: v1alpha1.ClusterRuntimeSpec{Paused: true}, hold: v1alpha1.ReasonPaused},
		"suspendEngine first":     {spec: v1alpha1.ClusterRuntimeSpec{SuspendEngine: true, Paused: true}, engine: &bus.EngineStatus{}, hold: v1alpha1.ReasonEngineSuspended},
		"paused before Argo CD":   {spec: v1alpha1.ClusterRuntimeSpec{Paused: true}, engine: &bus.EngineStatus{}, hold: v1alpha1.ReasonPaused},
		"Argo CD missing":         {engine: &bus.EngineStatus{}, creds: &bus.CredentialsStatus{}, hold: v1alpha1.ReasonEngineMissing},
		"AppProject missing":      {engine: &bus.EngineStatus{Reason: v1alpha1.ReasonProjectMissing}, hold: v1alpha1.ReasonProjectMissing},
		"credentials unusable":    {engine: &bus.EngineStatus{Available: true}, creds: &bus.CredentialsStatus{}, hold: v1alpha1.ReasonRegistryCredentialsUnavailable},
		"credentials stale":       {engine: &bus.EngineStatus{Available: true}, creds: &bus.CredentialsStatus{Reason: v1alpha1.ReasonRegistryCredentialsStale}, hold: v1alpha1.ReasonRegistryCredentialsStale},
		"good credentials expire": {engine: &bus.EngineStatus{Available: true}, creds: &bus.CredentialsStatus{OK: true, ExpiresAt: &expires}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt := &v1alpha1.ClusterRuntime{Spec: tc.spec}
			rt.Spec.Rollout = v1alpha1.RolloutSettings{Parallelism: 3, ActionTimeout: &metav1.Duration{Duration: time.Minute}}
			rt.Spec.Validation.Deployment = v1alpha1.ValidationDisabled
			e := EnvFor(rt, tc.engine, tc.creds, []string{"aicr-operator"}, t0)
			got := ""
			if e.Hold != nil {
				got = e.Hold.Reason
			}
			if got != tc.hold {
				t.Errorf("hold %q, want %q", got, tc.hold)
			}
			if e.Now != t0 || e.Parallelism != 3 || e.ActionTimeout != time.Minute || !e.ValidationDisabled || len(e.Identities) != 1 {
				t.Errorf("env %+v", e)
			}
			wantExpiry := time.Time{}
			if tc.creds != nil && tc.creds.ExpiresAt != nil {
				wantExpiry = *tc.creds.ExpiresAt
			}
			if !e.CredentialsExpireAt.Equal(wantExpiry) {
				t.Errorf("credentials expire at %s, want %s", e.CredentialsExpireAt, wantExpiry)
			}
		})
	}
	if e := EnvFor(&v1alpha1.ClusterRuntime{}, nil, nil, nil, t0); e.ActionTimeout != DefaultActionTimeout || e.ValidationDisabled {
		t.Errorf("defaults: %+v", e)
	}
}

func TestEngineSuspension(t *testing.T) {
	t.Parallel()
	readyReason := func(reason string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: gen}}
	}
	inProgress := withStep(ro("r-b-a", "sha256:a", "sha256:b", v1alpha1.PhaseProgressing), v1alpha1.StepInProgress)
	blocked := withStep(ro("r-b-a", "sha256:a", "sha256:b", v1alpha1.PhaseStalled), v1alpha1.StepBlocked)
	waiting := withStep(ro("r-b-a", "sha256:a", "sha256:b", v1alpha1.PhasePending), v1alpha1.StepPending)
	refused := "step 1/1 gpu-operator (Upgrade) of rollout r-b-a is in flight; automated sync is turned off once it finishes"
	tests := map[string]struct {
		suspend  bool
		conds    []metav1.Condition
		inflight *v1alpha1.RuntimeRollout
		want     Suspension
	}{
		"not asked, not suspended":          {conds: readyReason(v1alpha1.ReasonRolledOut, 4)},
		"asked: written off":                {suspend: true, conds: readyReason(v1alpha1.ReasonRolledOut, 4), want: Suspension{Write: true, Suspend: true, Tag: "suspend-g5"}},
		"asked, no status yet":              {suspend: true, want: Suspension{Write: true, Suspend: true, Tag: "suspend-g5"}},
		"asked, a pending step waits":       {suspend: true, inflight: waiting, want: Suspension{Write: true, Suspend: true, Tag: "suspend-g5"}},
		"asked, written at this generation": {suspend: true, conds: readyReason(v1alpha1.ReasonEngineSuspended, 5)},
		"asked again by a later edit":       {suspend: true, conds: readyReason(v1alpha1.ReasonEngineSuspended, 4), want: Suspension{Write: true, Suspend: true, Tag: "suspend-g5"}},
		"asked, a step in progress":         {suspend: true, inflight: inProgress, want: Suspension{Refused: refused}},
		"asked, a step blocked":             {suspend: true, inflight: blocked, want: Suspension{Refused: refused}},
		"refused even when written before":  {suspend: true, conds: readyReason(v1alpha1.ReasonEngineSuspended, 4), inflight: inProgress, want: Suspension{Refused: refused}},
		"no longer asked: written on":       {conds: readyReason(v1alpha1.ReasonEngineSuspended, 4), want: Suspension{Write: true, Suspend: false, Tag: "resume-g5"}},
		"no longer asked, mid-step too":     {conds: readyReason(v1alpha1.ReasonEngineSuspended, 4), inflight: inProgress, want: Suspension{Write: true, Suspend: false, Tag: "resume-g5"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Generation: 5}, Spec: v1alpha1.ClusterRuntimeSpec{SuspendEngine: tc.suspend}}
			rt.Status.Conditions = tc.conds
			if got := EngineSuspension(rt, tc.inflight); got != tc.want {
				t.Errorf("EngineSuspension = %+v, want %+v", got, tc.want)
			}
		})
	}
}
