// Package view renders rollouts and the runtime for people: describe (every step, each readiness
// fence, the approval, the outcome) and status (where the rollout is, what blocks it, since when).
package view

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Describe writes a rollout: its plans, phase and outcome, the approval, and every step with its
// readiness fences.
func Describe(w io.Writer, ro *v1alpha1.RuntimeRollout, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	s := ro.Status
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", ro.Name)
	row("Runtime", ro.Spec.Runtime)
	row("From", orDash(ro.Spec.FromDigest, "(nothing)"))
	row("To", orDash(ro.Spec.ToDigest, "(nothing: the runtime is deleted)"))
	if ro.Spec.Reason != "" {
		row("Reason", ro.Spec.Reason)
	}
	row("Phase", orDash(string(s.Phase), "Pending"))
	if s.Outcome != "" {
		row("Outcome", s.Outcome)
	}
	row("Progress", Progress(ro))
	if s.StartedAt != nil {
		row("Started", stamp(s.StartedAt, now))
	}
	if s.FinishedAt != nil {
		row("Finished", stamp(s.FinishedAt, now))
	}
	if ro.Spec.Deadline != nil {
		row("Deadline", stamp(ro.Spec.Deadline, now))
	}
	if s.Message != "" {
		row("Message", s.Message)
	}
	row("Approval", approvalLine(ro, now))
	if err := tw.Flush(); err != nil {
		return err
	}
	if a := ro.Spec.Approval; a != nil {
		fmt.Fprintf(w, "  Reason:\t%s\n", a.Reason)
		if a.Revoked != nil {
			fmt.Fprintf(w, "  Revoked by %s %s: %s\n", a.Revoked.RevokedBy, stamp(a.Revoked.RevokedAt, now), a.Revoked.Reason)
		}
	}
	for _, c := range s.Conditions {
		fmt.Fprintf(w, "Condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	fmt.Fprintf(w, "\nSteps:\n")
	if len(s.Steps) == 0 {
		fmt.Fprintf(w, "  (none yet)\n")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  #\tRELEASE\tACTION\tSTATE\tSTARTED\tFINISHED\tAFTER\n")
	for _, st := range s.Steps {
		action := string(st.Action)
		if st.ReadinessGate {
			action += " (gate)"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Index, st.Release, action, st.State,
			stamp(st.StartedAt, now), stamp(st.FinishedAt, now), orDash(strings.Join(st.DependsOn, ","), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, st := range s.Steps {
		if st.Message == "" && st.Verdict == nil {
			continue
		}
		fmt.Fprintf(w, "\n  Step %d %s (%s): %s\n", st.Index, st.Release, st.Action, st.State)
		if st.Reason != "" || st.Message != "" {
			fmt.Fprintf(w, "    %s\n", strings.TrimSpace(st.Reason+" "+st.Message))
		}
		if v := st.Verdict; v != nil {
			ready := "not ready"
			if v.Ready {
				ready = "ready"
			}
			fmt.Fprintf(w, "    verdict: %s (observed %s)\n", ready, stamp(v.ObservedAt, now))
			for _, f := range v.Fences {
				fmt.Fprintf(w, "      %s %-17s %s", fenceMark(f.State), f.Name, f.State)
				if msg := fenceMessage(f); msg != "" {
					fmt.Fprintf(w, ": %s", msg)
				}
				fmt.Fprintln(w)
			}
		}
	}
	return nil
}

// DescribeReleases writes the releases of the active plan that readiness judged not ready
// after their step (the runtime is then Ready=False/NotReady), each with its open fences;
// nothing when there are none.
func DescribeReleases(w io.Writer, rt *v1alpha1.ClusterRuntime, now time.Time) error {
	var bad []v1alpha1.ReleaseHealth
	for _, h := range rt.Status.Releases {
		if !h.Ready {
			bad = append(bad, h)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nReleases not ready since their rollout (runtime %s):\n", rt.Name); err != nil {
		return err
	}
	for _, h := range bad {
		fmt.Fprintf(w, "\n  %s (step %s): not ready since %s, observed %s\n", h.Release, orDash(h.Step, "-"), stamp(h.Since, now), stamp(h.ObservedAt, now))
		for _, f := range h.Fences {
			fmt.Fprintf(w, "      %s %-17s %s", fenceMark(f.State), f.Name, f.State)
			if msg := fenceMessage(f); msg != "" {
				fmt.Fprintf(w, ": %s", msg)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// Status writes where the runtime and its rollout are: step n/N, what blocks progress and since
// when, and what a person can do about it.
func Status(w io.Writer, rt *v1alpha1.ClusterRuntime, ro *v1alpha1.RuntimeRollout, now time.Time) error {
	ready := condition(rt.Status.Conditions, v1alpha1.ConditionReady)
	line := fmt.Sprintf("runtime %s:", rt.Name)
	if ready == nil {
		line += " Ready unknown (the planner has not reported yet)"
	} else {
		line += fmt.Sprintf(" Ready=%s %s", ready.Status, ready.Reason)
		if ready.Message != "" {
			line += ": " + ready.Message
		}
		line += fmt.Sprintf(" (since %s)", ago(ready.LastTransitionTime.Time, now))
	}
	fmt.Fprintln(w, line)
	if rt.Status.ActivePlan != "" {
		fmt.Fprintf(w, "  active plan:  %s\n", rt.Status.ActivePlan)
	}
	if rt.Status.DesiredPlan != "" && rt.Status.DesiredPlan != rt.Status.ActivePlan {
		fmt.Fprintf(w, "  desired plan: %s\n", rt.Status.DesiredPlan)
	}
	for _, t := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionMessagesParked, v1alpha1.ConditionResolved, v1alpha1.ConditionEngineAvailable} {
		c := condition(rt.Status.Conditions, t)
		if c == nil {
			continue
		}
		bad := v1alpha1.TrueNeedsAPerson(t) == (c.Status == metav1.ConditionTrue)
		if bad {
			fmt.Fprintf(w, "  %s=%s %s: %s (since %s)\n", c.Type, c.Status, c.Reason, c.Message, ago(c.LastTransitionTime.Time, now))
		}
	}
	if ro == nil {
		if rt.Status.Rollout == "" {
			fmt.Fprintln(w, "  no rollout yet")
		}
		return nil
	}
	fmt.Fprintf(w, "rollout %s: %s, %s\n", ro.Name, orDash(string(ro.Status.Phase), "Pending"), Progress(ro))
	if ro.Status.Outcome != "" {
		fmt.Fprintf(w, "  outcome %s (%s)\n", ro.Status.Outcome, stamp(ro.Status.FinishedAt, now))
	}
	for _, b := range Blocking(ro, now) {
		fmt.Fprintf(w, "  %s\n", b)
	}
	return nil
}

// Progress reads like "step 9/18 gpu-operator (Upgrade)", naming the first step in flight, or
// "18/18 steps done".
func Progress(ro *v1alpha1.RuntimeRollout) string {
	steps := ro.Status.Steps
	done := 0
	for _, st := range steps {
		if st.State == v1alpha1.StepSucceeded {
			done++
		}
	}
	for _, st := range steps {
		if st.State != v1alpha1.StepSucceeded && st.State != v1alpha1.StepPending {
			return fmt.Sprintf("step %d/%d %s (%s)", st.Index, len(steps), st.Release, st.Action)
		}
	}
	return fmt.Sprintf("%d/%d steps done", done, len(steps))
}

// Blocking lists, one line each, what holds the rollout: the steps in flight with their open
// fences and since when, steps awaiting approval, and blocked or failed steps.
func Blocking(ro *v1alpha1.RuntimeRollout, now time.Time) []string {
	var out []string
	n := len(ro.Status.Steps)
	for _, st := range ro.Status.Steps {
		head := fmt.Sprintf("step %d/%d %s (%s)", st.Index, n, st.Release, st.Action)
		switch st.State {
		case v1alpha1.StepInProgress:
			line := head + " in progress"
			if st.StartedAt != nil {
				line += " since " + ago(st.StartedAt.Time, now)
			}
			if open := openFences(st.Verdict); open != "" {
				line += "; waiting for " + open
			} else if st.Verdict == nil {
				line += "; no readiness verdict yet"
			}
			out = append(out, line)
		case v1alpha1.StepAwaitingApproval:
			out = append(out, fmt.Sprintf("%s awaits approval: kubectl aicr approve %s --reason TEXT", head, ro.Name))
		case v1alpha1.StepBlocked, v1alpha1.StepFailed:
			line := fmt.Sprintf("%s %s", head, strings.ToLower(string(st.State)))
			if st.FinishedAt != nil {
				line += " since " + ago(st.FinishedAt.Time, now)
			} else if st.StartedAt != nil {
				line += " (started " + ago(st.StartedAt.Time, now) + ")"
			}
			if msg := strings.TrimSpace(st.Reason + " " + st.Message); msg != "" {
				line += ": " + msg
			}
			out = append(out, line)
		}
	}
	if len(out) == 0 && ro.Status.Message != "" && ro.Status.Outcome == "" {
		out = append(out, ro.Status.Message)
	}
	return out
}

// fenceMessage is what a list of fences shows of f's message: a fence not judged because of the
// guard (an edited Application) repeats the guard's message after "not judged: ", which the
// fence before it already shows, so it says only that.
func fenceMessage(f v1alpha1.Fence) string {
	if !v1alpha1.FenceJudged(f) && strings.HasPrefix(f.Message, v1alpha1.FenceNotJudged+": ") {
		return v1alpha1.FenceNotJudged + " (the cause is above)"
	}
	return f.Message
}

// openFences lists a verdict's fences that are not passed, with their messages; the fences
// readiness did not judge because of them are named after, without repeating the cause.
func openFences(v *v1alpha1.Verdict) string {
	if v == nil {
		return ""
	}
	var names, notJudged []string
	for _, f := range v.Fences {
		switch {
		case f.State == v1alpha1.FencePassed:
			continue
		case !v1alpha1.FenceJudged(f):
			notJudged = append(notJudged, f.Name)
			continue
		}
		s := f.Name
		if f.State == v1alpha1.FenceFailed {
			s += " (failed)"
		}
		if f.Message != "" {
			s += ": " + f.Message
		}
		names = append(names, s)
	}
	if len(notJudged) > 0 {
		names = append(names, "not judged until then: "+strings.Join(notJudged, ", "))
	}
	return strings.Join(names, "; ")
}

func approvalLine(ro *v1alpha1.RuntimeRollout, now time.Time) string {
	a := ro.Spec.Approval
	removes := 0
	for _, st := range ro.Status.Steps {
		if st.Action == v1alpha1.ActionRemove {
			removes++
		}
	}
	if a == nil {
		if removes == 0 {
			return "none (no Remove step needs one)"
		}
		return fmt.Sprintf("none: %d Remove step(s) need one (kubectl aicr approve %s --reason TEXT)", removes, ro.Name)
	}
	s := fmt.Sprintf("approved by %s %s", a.ApprovedBy, stamp(a.ApprovedAt, now))
	switch {
	case a.Revoked != nil:
		s += ", revoked"
	case a.ExpiresAt != nil && !now.Before(a.ExpiresAt.Time):
		s += fmt.Sprintf(", expired %s", stamp(a.ExpiresAt, now))
	case a.ExpiresAt != nil:
		s += fmt.Sprintf(", expires %s", stamp(a.ExpiresAt, now))
	}
	return s
}

func condition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func fenceMark(s v1alpha1.FenceState) string {
	switch s {
	case v1alpha1.FencePassed:
		return "[x]"
	case v1alpha1.FenceFailed:
		return "[!]"
	default:
		return "[ ]"
	}
}

// stamp renders a time as RFC 3339 with how long ago (or from now) it is.
func stamp(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.RFC3339), ago(t.Time, now))
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	if d := now.Sub(t); d >= 0 {
		return duration.HumanDuration(d) + " ago"
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}

func orDash(s, dash string) string {
	if s == "" {
		return dash
	}
	return s
}
