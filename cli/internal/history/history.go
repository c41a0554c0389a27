// Package history is what kubectl aicr history and retry decide, without the cluster: the
// runtime's rollouts as rows (plans, outcome, who approved, how long), and whether a rollout
// may be retried.
package history

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Entry is one rollout of the runtime.
type Entry struct {
	Name string `json:"name"`
	// From and To are the plan digests the rollout moved between (From empty: from nothing).
	From string `json:"fromPlan,omitempty"`
	To   string `json:"toPlan,omitempty"`
	// Reason is why the planner created it (PlanChanged, EnginePolicyChanged, RuntimeDeleted).
	Reason string `json:"reason,omitempty"`
	Phase  string `json:"phase"`
	// Outcome is empty while the rollout is in flight.
	Outcome string `json:"outcome,omitempty"`
	// Steps is "succeeded/total".
	Steps string `json:"steps"`
	// ApprovedBy is who approved its Remove steps; RevokedBy who revoked that approval.
	ApprovedBy string     `json:"approvedBy,omitempty"`
	RevokedBy  string     `json:"revokedBy,omitempty"`
	Created    time.Time  `json:"created"`
	Started    *time.Time `json:"started,omitempty"`
	Finished   *time.Time `json:"finished,omitempty"`
	// Duration is the first step's start to the end, in seconds; to now while in flight.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	// Active marks the rollout whose plan is the runtime's active plan; Current the one the
	// runtime's status names.
	Active  bool `json:"active,omitempty"`
	Current bool `json:"current,omitempty"`
}

// Entries makes the rows of rollouts (newest first, as given) of runtime rt (nil: gone).
func Entries(rollouts []*v1alpha1.RuntimeRollout, rt *v1alpha1.ClusterRuntime, now time.Time) []Entry {
	out := make([]Entry, 0, len(rollouts))
	activeSeen := false
	for _, ro := range rollouts {
		e := Entry{
			Name: ro.Name, From: ro.Spec.FromDigest, To: ro.Spec.ToDigest, Reason: ro.Spec.Reason,
			Phase: cmp.Or(string(ro.Status.Phase), string(v1alpha1.PhasePending)), Outcome: ro.Status.Outcome,
			Steps: steps(ro), Created: ro.CreationTimestamp.Time,
		}
		if a := ro.Spec.Approval; a != nil {
			e.ApprovedBy = a.ApprovedBy
			if a.Revoked != nil {
				e.RevokedBy = a.Revoked.RevokedBy
			}
		}
		if t := ro.Status.StartedAt; t != nil {
			s := t.Time
			e.Started = &s
			end := now
			if f := ro.Status.FinishedAt; f != nil {
				end = f.Time
			}
			if d := end.Sub(s); d > 0 {
				e.DurationSeconds = d.Seconds()
			}
		}
		if f := ro.Status.FinishedAt; f != nil {
			t := f.Time
			e.Finished = &t
		}
		if rt != nil {
			e.Current = rt.Status.Rollout == ro.Name
			// The newest rollout that succeeded to the active plan put it in place.
			if !activeSeen && ro.Status.Outcome == v1alpha1.OutcomeSucceeded && ro.Spec.ToDigest == rt.Status.ActivePlan && string(rt.UID) == ro.Spec.RuntimeUID {
				e.Active, activeSeen = true, true
			}
		}
		out = append(out, e)
	}
	return out
}

func steps(ro *v1alpha1.RuntimeRollout) string {
	if c := ro.Status.StepCounts; c != nil {
		return fmt.Sprintf("%d/%d", c.Succeeded, c.Total)
	}
	done := 0
	for _, st := range ro.Status.Steps {
		if st.State == v1alpha1.StepSucceeded {
			done++
		}
	}
	return fmt.Sprintf("%d/%d", done, len(ro.Status.Steps))
}

// Write prints the rows as a table for people: plans as their first 12 hex digits.
func Write(w io.Writer, entries []Entry, now time.Time) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(w, "no rollouts of clusterruntime %s\n", v1alpha1.RuntimeName)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLLOUT\tFROM\tTO\tREASON\tRESULT\tSTEPS\tAPPROVED BY\tSTARTED\tDURATION")
	for _, e := range entries {
		result := cmp.Or(e.Outcome, e.Phase)
		if e.Active {
			result += " (active)"
		}
		name := e.Name
		if e.Current {
			name = "* " + name
		} else {
			name = "  " + name
		}
		approved := cmp.Or(e.ApprovedBy, "-")
		if e.RevokedBy != "" {
			approved += " (revoked by " + e.RevokedBy + ")"
		}
		started, took := "-", "-"
		if e.Started != nil {
			started = e.Started.UTC().Format(time.RFC3339)
		}
		if e.DurationSeconds > 0 {
			took = duration.HumanDuration(time.Duration(e.DurationSeconds * float64(time.Second)))
			if e.Finished == nil {
				took += " so far"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, Short(e.From), Short(e.To), cmp.Or(e.Reason, "-"), result, e.Steps, approved, started, took)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "(* the rollout the runtime's status names; (active): the rollout that put the active plan in place)")
	return err
}

// Short is a plan digest's first 12 hex digits, "none" for none.
func Short(digest string) string {
	if digest == "" {
		return "none"
	}
	hex := strings.TrimPrefix(digest, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// Retryable says why ro may not be retried for runtime rt (nil: the runtime is gone), or nil
// when it may: it failed or expired, it is the rollout the runtime's status names, and the
// runtime still wants its plan. Retrying is deleting it; the planner then creates the rollout of
// the same move again, its steps from what the stack holds now (docs/planner.md).
func Retryable(ro *v1alpha1.RuntimeRollout, rt *v1alpha1.ClusterRuntime) error {
	switch ro.Status.Outcome {
	case v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired:
	case "":
		return fmt.Errorf("runtimerollout %s is still in flight (phase %s): only a rollout that ended %s or %s can be retried", ro.Name, cmp.Or(string(ro.Status.Phase), string(v1alpha1.PhasePending)), v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired)
	case v1alpha1.OutcomeSucceeded:
		return fmt.Errorf("runtimerollout %s succeeded: there is nothing to retry", ro.Name)
	case v1alpha1.OutcomeRevoked:
		return fmt.Errorf("runtimerollout %s ended %s: a person revoked its approval; change the ClusterRuntime to go on (only a rollout that ended %s or %s can be retried)", ro.Name, ro.Status.Outcome, v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired)
	default:
		return fmt.Errorf("runtimerollout %s ended %s: only a rollout that ended %s or %s can be retried", ro.Name, ro.Status.Outcome, v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired)
	}
	switch {
	case rt == nil:
		return fmt.Errorf("runtimerollout %s: clusterruntime %s is gone, so nothing would roll it out again", ro.Name, v1alpha1.RuntimeName)
	case string(rt.UID) != ro.Spec.RuntimeUID:
		return fmt.Errorf("runtimerollout %s belongs to an earlier clusterruntime %s (uid %s, now %s): nothing would roll it out again", ro.Name, rt.Name, ro.Spec.RuntimeUID, rt.UID)
	case rt.Status.Rollout != ro.Name:
		return fmt.Errorf("runtimerollout %s is not the runtime's current rollout (%s is): the runtime has moved on", ro.Name, cmp.Or(rt.Status.Rollout, "none"))
	case rt.Status.DesiredPlan != "" && rt.Status.DesiredPlan != ro.Spec.ToDigest:
		return fmt.Errorf("runtimerollout %s went to plan %s, but the runtime now wants plan %s: the planner rolls that out without a retry", ro.Name, ro.Spec.ToDigest, rt.Status.DesiredPlan)
	}
	return nil
}
