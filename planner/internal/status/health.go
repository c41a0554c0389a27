package status

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// maxHealthFences bounds the fences kept per release (the CRD's limit).
const maxHealthFences = 16

// ObserveHealth records readiness's verdict on a release in the runtime's release list
// (status.releases) and reports whether the list changed. A verdict no step in flight waits
// for (after the release's step, or on a repair) is recorded when it judged a later
// resourceVersion than both the release's entry and stepVerdict, the verdict the release's own
// step last recorded (nil when unknown), so a verdict from during the step, or the step's own
// verdict delivered again, cannot undo or repeat it. A verdict a step in flight waits for (awaited) is the step's; it only updates an
// entry the release already has, when ready, so a release that was not ready and got a new
// step is ready again once that step is. The list keeps a ready entry: it is the floor for the
// next verdict.
func ObserveHealth(list []v1alpha1.ReleaseHealth, v *bus.ReleaseVerdict, stepVerdict *v1alpha1.Verdict, awaited bool, now time.Time) ([]v1alpha1.ReleaseHealth, bool) {
	i := slices.IndexFunc(list, func(h v1alpha1.ReleaseHealth) bool { return h.Release == v.Release })
	rv := v.Observed.ResourceVersion
	switch {
	case awaited && (!v.Ready || i < 0):
		return list, false
	case i >= 0 && !rollout.Newer(rv, list[i].ResourceVersion):
		return list, false // no later than what is recorded: delivered late
	case i < 0 && stepVerdict != nil && !rollout.Newer(rv, stepVerdict.ResourceVersion):
		return list, false // from before the step's own verdict, or that verdict again
	}
	observed := v.Time
	if observed.IsZero() {
		observed = now
	}
	h := v1alpha1.ReleaseHealth{Release: v.Release, Ready: v.Ready, Step: v.StepID, ResourceVersion: rv, ObservedAt: ptrTime(observed)}
	if !v.Ready {
		h.Since = ptrTime(now)
		if i >= 0 && !list[i].Ready && list[i].Since != nil {
			h.Since = list[i].Since
		}
		for _, f := range v.Fences {
			if f.State != v1alpha1.FencePassed && len(h.Fences) < maxHealthFences {
				h.Fences = append(h.Fences, f)
			}
		}
	}
	out := slices.Clone(list)
	if i < 0 {
		out = append(out, h)
		slices.SortFunc(out, func(a, b v1alpha1.ReleaseHealth) int { return strings.Compare(a.Release, b.Release) })
	} else {
		out[i] = h
	}
	return out, true
}

// PruneHealth drops the entries of releases that are not in the active plan (releases lists
// its releases; nil when it cannot be read, and then nothing is dropped).
func PruneHealth(list []v1alpha1.ReleaseHealth, releases []string) []v1alpha1.ReleaseHealth {
	if releases == nil {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), func(h v1alpha1.ReleaseHealth) bool { return !slices.Contains(releases, h.Release) })
}

// NotReady lists the entries of releases judged not ready after their step, among those of
// the active plan (releases; nil: every entry counts).
func NotReady(list []v1alpha1.ReleaseHealth, releases []string) []v1alpha1.ReleaseHealth {
	var out []v1alpha1.ReleaseHealth
	for _, h := range PruneHealth(list, releases) {
		if !h.Ready {
			out = append(out, h)
		}
	}
	return out
}

// notReadyMessage is Ready=False/NotReady's message: each release with the fences readiness
// judged not passed and their messages, then, by name only, those it did not judge because of
// them (v1alpha1.FenceJudged): a hand edit's cause is said once, not once per fence.
func notReadyMessage(bad []v1alpha1.ReleaseHealth, activeDigest string) string {
	parts := make([]string, 0, len(bad))
	for _, h := range bad {
		var fences, notJudged []string
		for _, f := range h.Fences {
			switch {
			case f.State == v1alpha1.FencePassed:
			case !v1alpha1.FenceJudged(f):
				notJudged = append(notJudged, f.Name)
			default:
				fences = append(fences, fmt.Sprintf("%s %s: %s", f.Name, f.State, f.Message))
			}
		}
		if len(notJudged) > 0 {
			fences = append(fences, "not judged until then: "+strings.Join(notJudged, ", "))
		}
		since := ""
		if h.Since != nil {
			since = " since " + h.Since.UTC().Format(time.RFC3339)
		}
		parts = append(parts, fmt.Sprintf("release %s is not ready%s (%s)", h.Release, since, strings.Join(fences, "; ")))
	}
	return fmt.Sprintf("plan %s was rolled out, but %s; readiness reports it when that changes (kubectl aicr describe shows the fences)", activeDigest, strings.Join(parts, "; "))
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t.UTC()); return &m }
