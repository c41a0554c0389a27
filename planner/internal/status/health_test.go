package status

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

func verdict(release, rv string, ready bool) *bus.ReleaseVerdict {
	v := &bus.ReleaseVerdict{Runtime: "cluster", Release: release, StepID: "r-b-a/2", Ready: ready, Observed: bus.ObservedStatus{ResourceVersion: rv}}
	if !ready {
		v.Fences = []v1alpha1.Fence{
			{Name: v1alpha1.FenceComparedToSpec, State: v1alpha1.FencePassed, Message: "compared"},
			{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Progressing: some resources are not healthy yet"},
		}
	}
	return v
}

// A verdict after a release's step is recorded in the runtime's release list; the order of
// verdicts that arrive late is the resourceVersion's, never the arrival's.
func TestObserveHealth(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stepVerdict := &v1alpha1.Verdict{Ready: true, ResourceVersion: "100"}
	notReady := func(rv string) []v1alpha1.ReleaseHealth {
		l, _ := ObserveHealth(nil, verdict("nfd", rv, false), stepVerdict, false, t1)
		return l
	}
	tests := map[string]struct {
		list        []v1alpha1.ReleaseHealth
		v           *bus.ReleaseVerdict
		stepVerdict *v1alpha1.Verdict
		awaited     bool
		changed     bool
		ready       *bool // the entry's Ready afterwards; nil: no entry
	}{
		"a release that stops being ready after its step is recorded, with its open fences": {
			v: verdict("nfd", "120", false), stepVerdict: stepVerdict, changed: true, ready: ptr(false),
		},
		"a not-ready verdict from during the step, delivered after the step's ready one, is old": {
			v: verdict("nfd", "90", false), stepVerdict: stepVerdict,
		},
		"the step's own ready verdict delivered again records nothing": {
			v: verdict("nfd", "100", true), stepVerdict: stepVerdict,
		},
		"recovery is recorded, and kept as the floor for later verdicts": {
			list: notReady("120"), v: verdict("nfd", "130", true), stepVerdict: stepVerdict, changed: true, ready: ptr(true),
		},
		"a verdict older than the entry is old": {
			list: notReady("120"), v: verdict("nfd", "110", true), stepVerdict: stepVerdict, ready: ptr(false),
		},
		"a not-ready verdict a step in flight waits for is the step's": {
			v: verdict("nfd", "120", false), awaited: true,
		},
		"a ready verdict a step in flight waits for clears an entry the release has": {
			list: notReady("120"), v: verdict("nfd", "140", true), awaited: true, changed: true, ready: ptr(true),
		},
		"a ready verdict a step in flight waits for adds no entry": {
			v: verdict("nfd", "140", true), awaited: true,
		},
		"a verdict on a repair (no step known) is recorded": {
			v: verdict("nfd", "150", false), changed: true, ready: ptr(false),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, changed := ObserveHealth(tc.list, tc.v, tc.stepVerdict, tc.awaited, t1.Add(time.Minute))
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			var got *v1alpha1.ReleaseHealth
			for i := range out {
				if out[i].Release == "nfd" {
					got = &out[i]
				}
			}
			switch {
			case tc.ready == nil && got != nil:
				t.Errorf("entry %+v, want none", got)
			case tc.ready != nil && got == nil:
				t.Errorf("no entry, want ready=%v", *tc.ready)
			case tc.ready != nil && got.Ready != *tc.ready:
				t.Errorf("entry ready=%v, want %v", got.Ready, *tc.ready)
			}
			if !changed {
				return
			}
			if got.ResourceVersion != tc.v.Observed.ResourceVersion || got.Step != tc.v.StepID {
				t.Errorf("entry %+v does not record the verdict's step and resourceVersion", got)
			}
			if !got.Ready && (len(got.Fences) != 1 || got.Fences[0].Name != v1alpha1.FenceHealthy || got.Since == nil) {
				t.Errorf("not-ready entry %+v: want only the open fence, and since when", got)
			}
			if got.Ready && (got.Since != nil || len(got.Fences) != 0) {
				t.Errorf("ready entry %+v keeps a since or fences", got)
			}
		})
	}
}

// A release not ready since some time keeps that time while it stays not ready.
func TestObserveHealthKeepsSince(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, _ := ObserveHealth(nil, verdict("nfd", "120", false), nil, false, t1)
	l, _ = ObserveHealth(l, verdict("nfd", "130", false), nil, false, t1.Add(time.Minute))
	if !l[0].Since.Time.Equal(t1) {
		t.Errorf("since %s, want %s", l[0].Since, t1)
	}
}

// After its rollout, a release of the active plan that is not ready makes the runtime
// Ready=False/NotReady naming it and its open fence; once ready again, RolledOut; an entry of
// a release that left the plan does not count and is dropped.
func TestNotReadyAfterRolledOut(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := Inputs{Runtime: &v1alpha1.ClusterRuntime{}, DesiredDigest: "sha256:b", ActiveDigest: "sha256:b", ActiveReleases: []string{"cert-manager", "nfd"}}
	in.Runtime.Status.Releases, _ = ObserveHealth(nil, verdict("nfd", "120", false), nil, false, t1)
	st, reason, msg := ready(in)
	if st != metav1.ConditionFalse || reason != v1alpha1.ReasonNotReady || !strings.Contains(msg, "release nfd is not ready since 2026-01-01T00:00:00Z (Healthy Open: Progressing") {
		t.Errorf("Ready=%s %s: %q; want False NotReady naming nfd and its open fence", st, reason, msg)
	}
	if _, r, _ := stalled(in); r != v1alpha1.ReasonNotStalled {
		t.Errorf("Stalled reason %s: a release not ready is not a stall", r)
	}
	in.InFlight = inflight("")
	if _, reason, _ := ready(in); reason != v1alpha1.ReasonRollingOut {
		t.Errorf("during a rollout Ready reason %s, want RollingOut", reason)
	}
	in.InFlight = nil
	in.Runtime.Status.Releases, _ = ObserveHealth(in.Runtime.Status.Releases, verdict("nfd", "130", true), nil, false, t1)
	if _, reason, _ := ready(in); reason != v1alpha1.ReasonRolledOut {
		t.Errorf("after recovery Ready reason %s, want RolledOut", reason)
	}
	in.Runtime.Status.Releases, _ = ObserveHealth(in.Runtime.Status.Releases, verdict("gone", "140", false), nil, false, t1)
	if _, reason, _ := ready(in); reason != v1alpha1.ReasonRolledOut {
		t.Errorf("a release outside the active plan made Ready %s", reason)
	}
	st2 := in.Runtime.Status.DeepCopy()
	Record(st2, in, Conditions(in), 1, t1)
	if len(st2.Releases) != 1 || st2.Releases[0].Release != "nfd" {
		t.Errorf("recorded releases %+v, want only nfd's entry (gone left the plan)", st2.Releases)
	}
}

func ptr[T any](v T) *T { return &v }

// A release left NotReady by a hand edit: readiness's guard fence says why, and every later
// fence repeats it after "not judged: ". The Ready message says the cause once and names the
// fences not judged, so it stays one readable line.
func TestNotReadyMessageSaysAHandEditOnce(t *testing.T) {
	cause := "the Application's spec is not what plan sha256:b says (source.helm.valuesObject differs); undo it, or change the runtime instead"
	v := verdict("gpu-operator", "140", false)
	v.Fences = []v1alpha1.Fence{{Name: v1alpha1.FenceComparedToSpec, State: v1alpha1.FenceOpen, Message: cause}}
	for _, n := range []string{v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep, v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition} {
		v.Fences = append(v.Fences, v1alpha1.Fence{Name: n, State: v1alpha1.FenceOpen, Message: v1alpha1.FenceNotJudged + ": " + cause})
	}
	in := Inputs{Runtime: &v1alpha1.ClusterRuntime{}, DesiredDigest: "sha256:b", ActiveDigest: "sha256:b", ActiveReleases: []string{"gpu-operator"}}
	in.Runtime.Status.Releases, _ = ObserveHealth(nil, v, nil, false, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, reason, msg := ready(in)
	if reason != v1alpha1.ReasonNotReady {
		t.Fatalf("reason %s, want NotReady", reason)
	}
	if n := strings.Count(msg, cause); n != 1 {
		t.Errorf("the cause appears %d times, want once: %q", n, msg)
	}
	want := "(ComparedToSpec Open: " + cause + "; not judged until then: SyncedAtRevision, SyncedAfterStep, Healthy, NoErrorCondition)"
	if !strings.Contains(msg, want) {
		t.Errorf("message %q\nlacks %q", msg, want)
	}
}
