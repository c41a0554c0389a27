package view

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// StatusScreen is the screen of status --watch on a terminal: the runtime's Ready condition and
// plans, the conditions that need a person, then the rollout (RolloutScreen). rt is nil while the
// ClusterRuntime does not exist.
func StatusScreen(rt *v1alpha1.ClusterRuntime, ro *v1alpha1.RuntimeRollout, now time.Time, st style.Style) []string {
	var out []string
	if rt == nil {
		return append(out, st.Bold("clusterruntime "+v1alpha1.RuntimeName)+": not found yet; waiting for it to be created")
	}
	ready := condition(rt.Status.Conditions, v1alpha1.ConditionReady)
	line := st.Bold("runtime "+style.Escape(rt.Name)) + "  "
	if ready == nil {
		line += "Ready unknown (the planner has not reported yet)"
	} else {
		line += st.Ready(string(ready.Status), fmt.Sprintf("Ready=%s %s", ready.Status, ready.Reason))
		if ready.Message != "" {
			line += ": " + style.Escape(ready.Message)
		}
		line += st.Dim(fmt.Sprintf("  (since %s)", ago(ready.LastTransitionTime.Time, now)))
	}
	out = append(out, line)
	if rt.Status.ActivePlan != "" {
		out = append(out, "  active plan:  "+style.Escape(rt.Status.ActivePlan))
	}
	if rt.Status.DesiredPlan != "" && rt.Status.DesiredPlan != rt.Status.ActivePlan {
		out = append(out, "  desired plan: "+style.Escape(rt.Status.DesiredPlan))
	}
	for _, c := range attention(rt) {
		out = append(out, "  "+st.State(string(v1alpha1.StepBlocked), fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))+
			": "+style.Escape(c.Message)+st.Dim(fmt.Sprintf(" (since %s)", ago(c.LastTransitionTime.Time, now))))
	}
	if rt.Spec.Paused {
		out = append(out, "  "+st.State(string(v1alpha1.StepAwaitingApproval), "paused")+": no new step starts (kubectl aicr resume)")
	}
	if rt.Spec.SuspendEngine {
		out = append(out, "  "+st.State(string(v1alpha1.StepAwaitingApproval), "engine suspended")+": automated sync is written off (kubectl aicr resume-engine)")
	}
	if ro == nil {
		if rt.Status.Rollout == "" {
			out = append(out, "no rollout yet")
		} else {
			out = append(out, "rollout "+style.Escape(rt.Status.Rollout)+": not found")
		}
		return out
	}
	return append(out, RolloutScreen(ro, now, st)...)
}

// attention lists the runtime conditions in a state that needs a person: Stalled True, Resolved
// or EngineAvailable False.
func attention(rt *v1alpha1.ClusterRuntime) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionMessagesParked, v1alpha1.ConditionResolved, v1alpha1.ConditionEngineAvailable} {
		c := condition(rt.Status.Conditions, t)
		if c != nil && v1alpha1.TrueNeedsAPerson(t) == (c.Status == metav1.ConditionTrue) {
			out = append(out, *c)
		}
	}
	return out
}

// RolloutScreen is a rollout as a live view: phase and elapsed time, a progress bar of the
// succeeded steps, then one line per step (state, action, how long, what it waits for) with the
// open fences, the approval or the failure under the steps that have one.
func RolloutScreen(ro *v1alpha1.RuntimeRollout, now time.Time, st style.Style) []string {
	s := ro.Status
	phase := string(s.Phase)
	if phase == "" {
		phase = string(v1alpha1.PhasePending)
	}
	head := st.Bold("rollout "+style.Escape(ro.Name)) + "  " + st.State(phaseState(ro), phase)
	if s.Outcome != "" {
		head += " (" + style.Escape(s.Outcome) + ")"
	}
	if s.StartedAt != nil {
		end := now
		if s.FinishedAt != nil {
			end = s.FinishedAt.Time
		}
		head += "  elapsed " + Short(end.Sub(s.StartedAt.Time))
	}
	out := []string{head}
	done := 0
	for _, step := range s.Steps {
		if step.State == v1alpha1.StepSucceeded {
			done++
		}
	}
	out = append(out, fmt.Sprintf("  %s %d/%d steps succeeded", style.Bar(done, len(s.Steps), 30), done, len(s.Steps)))
	if s.Message != "" && s.Outcome == "" {
		out = append(out, "  "+style.Escape(s.Message))
	}
	nameW, actW := 0, 0
	for _, step := range s.Steps {
		nameW = max(nameW, len(step.Release))
		actW = max(actW, len(actionOf(step)))
	}
	idxW := len(fmt.Sprint(len(s.Steps)))
	for _, step := range s.Steps {
		state := string(step.State)
		took := ""
		switch {
		case step.StartedAt != nil && step.FinishedAt != nil:
			took = Short(step.FinishedAt.Sub(step.StartedAt.Time))
		case step.StartedAt != nil && step.State == v1alpha1.StepInProgress:
			took = Short(now.Sub(step.StartedAt.Time))
		}
		line := fmt.Sprintf("  %s %*d %s %s %s %6s", st.State(state, style.Symbol(state)), idxW, step.Index,
			style.Pad(style.Escape(step.Release), nameW), style.Pad(actionOf(step), actW), st.State(state, style.Pad(state, 16)), took)
		if len(step.DependsOn) > 0 && step.State == v1alpha1.StepPending {
			line += st.Dim("  after " + style.Escape(strings.Join(step.DependsOn, ", ")))
		}
		out = append(out, strings.TrimRight(line, " "))
		indent := "  " + strings.Repeat(" ", idxW+3)
		switch step.State {
		case v1alpha1.StepInProgress:
			if step.Verdict == nil {
				out = append(out, indent+st.Dim("no readiness verdict yet"))
			}
			if step.Verdict != nil {
				for _, f := range step.Verdict.Fences {
					if f.State == v1alpha1.FencePassed {
						continue
					}
					fs := string(v1alpha1.StepPending)
					if f.State == v1alpha1.FenceFailed {
						fs = string(v1alpha1.StepFailed)
					}
					fl := indent + st.State(fs, fenceMark(f.State)+" "+style.Escape(f.Name))
					if msg := fenceMessage(f); msg != "" {
						fl += ": " + style.Escape(msg)
					}
					out = append(out, fl)
				}
			}
		case v1alpha1.StepAwaitingApproval:
			out = append(out, indent+"awaits approval: kubectl aicr approve "+style.Escape(ro.Name)+" --reason TEXT")
		case v1alpha1.StepBlocked, v1alpha1.StepFailed:
			if msg := strings.TrimSpace(step.Reason + " " + step.Message); msg != "" {
				out = append(out, indent+st.State(state, style.Escape(msg)))
			}
		}
	}
	return out
}

// DescribeScreen is describe --watch on a terminal: the rollout's progress bar and elapsed time
// over the describe view.
func DescribeScreen(ro *v1alpha1.RuntimeRollout, now time.Time, st style.Style) ([]string, error) {
	out := RolloutScreen(ro, now, st)[:2]
	var b bytes.Buffer
	if err := Describe(&b, ro, now); err != nil {
		return nil, err
	}
	out = append(out, "")
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		out = append(out, style.Escape(strings.ReplaceAll(l, "\t", "    ")))
	}
	return out, nil
}

func actionOf(step v1alpha1.Step) string {
	if step.ReadinessGate {
		return string(step.Action) + " (gate)"
	}
	return string(step.Action)
}

// phaseState maps a rollout phase to the step state whose colour it takes.
func phaseState(ro *v1alpha1.RuntimeRollout) string {
	switch ro.Status.Phase {
	case v1alpha1.PhaseSucceeded:
		return string(v1alpha1.StepSucceeded)
	case v1alpha1.PhaseProgressing:
		return string(v1alpha1.StepInProgress)
	case v1alpha1.PhaseAwaitingApproval:
		return string(v1alpha1.StepAwaitingApproval)
	case v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseRevoked:
		return string(v1alpha1.StepFailed)
	case v1alpha1.PhaseStalled:
		return string(v1alpha1.StepBlocked)
	}
	return string(v1alpha1.StepPending)
}

// Short renders a duration for a live view: 12s, 4m05s, 1h02m.
func Short(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// Changes turns a sequence of observations into one line per change, for status --watch and
// describe --watch when the output is not a terminal: a line for the runtime's Ready condition,
// each condition that needs a person, the rollout's phase and progress, and each step, printed
// when what it says changed (times aside).
type Changes struct {
	last map[string]string
}

// NewChanges starts with nothing seen.
func NewChanges() *Changes { return &Changes{last: map[string]string{}} }

// Lines returns the lines of what changed since the previous call. rt nil with runtime true
// means the ClusterRuntime does not exist; ro may be nil.
func (c *Changes) Lines(runtime bool, rt *v1alpha1.ClusterRuntime, ro *v1alpha1.RuntimeRollout, now time.Time) []string {
	type entry struct{ key, line string }
	var entries []entry
	add := func(key, line string) { entries = append(entries, entry{key, line}) }
	if runtime {
		switch {
		case rt == nil:
			add("runtime", "clusterruntime "+v1alpha1.RuntimeName+": not found yet; waiting for it to be created")
		default:
			ready := condition(rt.Status.Conditions, v1alpha1.ConditionReady)
			line := "runtime " + rt.Name + ": Ready unknown (the planner has not reported yet)"
			if ready != nil {
				line = fmt.Sprintf("runtime %s: Ready=%s %s", rt.Name, ready.Status, ready.Reason)
				if ready.Message != "" {
					line += ": " + ready.Message
				}
			}
			add("runtime", line)
			for _, t := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionMessagesParked, v1alpha1.ConditionResolved, v1alpha1.ConditionEngineAvailable} {
				line := ""
				for _, cond := range attention(rt) {
					if cond.Type == t {
						line = fmt.Sprintf("runtime %s: %s=%s %s: %s", rt.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
					}
				}
				if line == "" && c.last["cond/"+t] != "" {
					if cond := condition(rt.Status.Conditions, t); cond != nil {
						line = fmt.Sprintf("runtime %s: %s=%s %s", rt.Name, cond.Type, cond.Status, cond.Reason)
					}
				}
				if line != "" {
					add("cond/"+t, line)
				}
			}
			add("plans", fmt.Sprintf("runtime %s: active plan %s, desired plan %s", rt.Name, orDash(rt.Status.ActivePlan, "(none)"), orDash(rt.Status.DesiredPlan, "(none)")))
		}
	}
	if ro != nil {
		done := 0
		for _, st := range ro.Status.Steps {
			if st.State == v1alpha1.StepSucceeded {
				done++
			}
		}
		line := fmt.Sprintf("rollout %s: %s, %d/%d steps succeeded, %s", ro.Name, orDash(string(ro.Status.Phase), "Pending"), done, len(ro.Status.Steps), Progress(ro))
		if ro.Status.Outcome != "" {
			line += ", outcome " + ro.Status.Outcome
		}
		add("rollout/"+ro.Name, line)
		n := len(ro.Status.Steps)
		for _, st := range ro.Status.Steps {
			line := fmt.Sprintf("step %d/%d %s (%s) %s", st.Index, n, st.Release, st.Action, orDash(string(st.State), "Pending"))
			switch st.State {
			case v1alpha1.StepInProgress:
				if open := openFences(st.Verdict); open != "" {
					line += "; waiting for " + open
				} else if st.Verdict == nil {
					line += "; no readiness verdict yet"
				}
			case v1alpha1.StepAwaitingApproval:
				line += ": kubectl aicr approve " + ro.Name + " --reason TEXT"
			case v1alpha1.StepBlocked, v1alpha1.StepFailed:
				if msg := strings.TrimSpace(st.Reason + " " + st.Message); msg != "" {
					line += ": " + msg
				}
			case v1alpha1.StepSucceeded:
				if st.StartedAt != nil && st.FinishedAt != nil {
					line += " in " + Short(st.FinishedAt.Sub(st.StartedAt.Time))
				}
			}
			add(fmt.Sprintf("step/%s/%d", ro.Name, st.Index), line)
		}
	}
	stamp := now.Format("15:04:05")
	var out []string
	for _, e := range entries {
		if c.last[e.key] == e.line {
			continue
		}
		c.last[e.key] = e.line
		out = append(out, stamp+" "+style.Escape(e.line))
	}
	return out
}
