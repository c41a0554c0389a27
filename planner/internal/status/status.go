// Package status computes a ClusterRuntime's conditions (Ready, Stalled, Resolved,
// EngineAvailable), progress and the rest of its status (Record) from what the planner knows,
// and which condition changes deserve an Event (Transitions). It is pure: the controller
// gathers the inputs and writes the result through the status subresource.
package status

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Inputs are the planner's observations of one runtime.
type Inputs struct {
	// Runtime is the ClusterRuntime (spec and metadata are read).
	Runtime *v1alpha1.ClusterRuntime
	// ResolveReason is "" when the spec resolved to DesiredDigest, ReasonResolving while a plan
	// is computed, or the failure reason (plan.ReasonOf).
	ResolveReason string
	// ResolveMessage explains a failure.
	ResolveMessage string
	// DesiredDigest is the plan the spec resolves to ("" when it does not).
	DesiredDigest string
	// ActiveDigest is the plan the stack was last rolled out to.
	ActiveDigest string
	// EnginePolicy is the engine policy the Applications were last written under ("" keeps
	// the one recorded).
	EnginePolicy string
	// PlanUnreadable explains why the active plan cannot be read ("" when it can).
	PlanUnreadable string
	// InFlight is the rollout in flight, if any.
	InFlight *v1alpha1.RuntimeRollout
	// Last is the last rollout that ended without success while the stack is not at the
	// desired plan (it keeps the runtime stalled until the spec changes or it is deleted).
	Last *v1alpha1.RuntimeRollout
	// Waiting says that the desired plan waits for InFlight to finish ("" when it does not).
	Waiting string
	// Engine is readiness's last report on Argo CD (nil: none yet).
	Engine *bus.EngineStatus
	// Credentials is the credential refresher's last report (nil: none yet).
	Credentials *bus.CredentialsStatus
	// SuspensionRefused explains why suspendEngine is not applied yet ("" when it is).
	SuspensionRefused string
	// Operator is the planner's own build, recorded as status.operator (nil keeps the one
	// recorded).
	Operator *v1alpha1.OperatorBuild
	// ActiveReleases are the releases of the active plan (nil when it cannot be read): only
	// their entries in status.releases count, and Record drops the others.
	ActiveReleases []string
	// Parked is what the parked stream holds (nil: not read yet).
	Parked *bus.ParkedState
}

// parkedListed is how many parked messages the MessagesParked condition names.
const parkedListed = 5

// Conditions returns the four conditions, without transition times.
func Conditions(in Inputs) []metav1.Condition {
	gen := in.Runtime.Generation
	out := make([]metav1.Condition, 0, 4)
	for _, f := range []struct {
		typ string
		fn  func(Inputs) (metav1.ConditionStatus, string, string)
	}{
		{v1alpha1.ConditionReady, ready},
		{v1alpha1.ConditionStalled, stalled},
		{v1alpha1.ConditionResolved, resolved},
		{v1alpha1.ConditionEngineAvailable, engine},
	} {
		st, reason, msg := f.fn(in)
		if len(msg) > 32768 {
			msg = msg[:32765] + "..."
		}
		out = append(out, metav1.Condition{Type: f.typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	if st, reason, msg, ok := parked(in); ok {
		out = append(out, metav1.Condition{Type: v1alpha1.ConditionMessagesParked, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	return out
}

// parked is the MessagesParked condition: True while the parked stream holds messages, False
// once it is empty again; absent (ok false) on a runtime that never had one parked, and kept
// as it is while the stream was not read.
func parked(in Inputs) (st metav1.ConditionStatus, reason, msg string, ok bool) {
	had := meta.FindStatusCondition(in.Runtime.Status.Conditions, v1alpha1.ConditionMessagesParked)
	switch {
	case in.Parked == nil && had == nil:
		return "", "", "", false
	case in.Parked == nil:
		return had.Status, had.Reason, had.Message, true
	case in.Parked.Total == 0 && had == nil:
		return "", "", "", false
	case in.Parked.Total == 0:
		return metav1.ConditionFalse, v1alpha1.ReasonNoMessagesParked, "no message is parked", true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d message(s) parked after their handling kept failing; fix the cause, then send them back with kubectl aicr parked --retry", in.Parked.Total)
	for i, p := range in.Parked.Oldest {
		if i == parkedListed {
			fmt.Fprintf(&b, "; and %d more (kubectl aicr parked)", in.Parked.Total-parkedListed)
			break
		}
		fmt.Fprintf(&b, "; #%d %s", p.Seq, p.Subject)
		if p.Consumer != "" {
			fmt.Fprintf(&b, " (the %s gave up after %d failures)", p.Consumer, p.Failures)
		}
		fmt.Fprintf(&b, ": %s", p.Error)
	}
	return metav1.ConditionTrue, v1alpha1.ReasonMessageParked, b.String(), true
}

func credsBad(in Inputs) bool { return in.Credentials != nil && !in.Credentials.OK }

func credsReason(cs *bus.CredentialsStatus) string {
	if cs.Reason != "" {
		return cs.Reason
	}
	return v1alpha1.ReasonRegistryCredentialsUnavailable
}

func ready(in Inputs) (metav1.ConditionStatus, string, string) {
	f := metav1.ConditionFalse
	spec := in.Runtime.Spec
	switch {
	case in.Runtime.DeletionTimestamp != nil:
		msg := "the runtime is being deleted"
		if in.InFlight != nil {
			msg += ": " + rollout.Progress(in.InFlight)
		}
		return f, v1alpha1.ReasonDeleting, msg
	case in.PlanUnreadable != "":
		return f, v1alpha1.ReasonPlanUnreadable, in.PlanUnreadable
	case spec.SuspendEngine && in.SuspensionRefused != "":
		return f, v1alpha1.ReasonEngineSuspensionRefused, in.SuspensionRefused
	case spec.SuspendEngine:
		return f, v1alpha1.ReasonEngineSuspended, "automated sync is off on every owned Application and no step starts; set spec.suspendEngine to false to resume"
	case spec.Paused:
		msg := "spec.paused is true: no new step starts"
		if in.InFlight != nil {
			msg += "; " + rollout.Progress(in.InFlight)
		}
		return f, v1alpha1.ReasonPaused, msg
	case in.Engine != nil && !in.Engine.Available:
		return f, cmp.Or(in.Engine.Reason, v1alpha1.ReasonEngineMissing), "no step starts until Argo CD is available: " + in.Engine.Message
	case in.InFlight != nil:
		msg := "rollout " + in.InFlight.Name + ": " + rollout.Progress(in.InFlight)
		if reason, m, ok := rollout.StallReason(in.InFlight); ok {
			msg += "; " + reason + ": " + m
		}
		if in.Engine == nil {
			msg += "; no new step starts: " + rollout.EngineNotReportedMessage
		}
		if in.Waiting != "" {
			msg += "; " + in.Waiting
		}
		return f, v1alpha1.ReasonRollingOut, msg
	case in.ActiveDigest == "":
		msg := "nothing has been rolled out yet"
		if in.Last != nil {
			msg += fmt.Sprintf("; rollout %s ended %s: %s", in.Last.Name, in.Last.Status.Outcome, in.Last.Status.Message)
		} else if in.ResolveMessage != "" {
			msg += ": " + in.ResolveMessage
		}
		return f, v1alpha1.ReasonNoActivePlan, msg
	case in.DesiredDigest == "":
		return f, v1alpha1.ReasonNotReady, fmt.Sprintf("the spec does not resolve to a plan; the stack stays at plan %s", in.ActiveDigest)
	case in.DesiredDigest != in.ActiveDigest:
		msg := fmt.Sprintf("the stack is at plan %s, the spec asks for %s", in.ActiveDigest, in.DesiredDigest)
		if in.Last != nil {
			msg += fmt.Sprintf("; rollout %s ended %s", in.Last.Name, in.Last.Status.Outcome)
		}
		return f, v1alpha1.ReasonNotReady, msg
	case spec.Validation.Deployment == v1alpha1.ValidationDisabled:
		return metav1.ConditionTrue, v1alpha1.ReasonValidationDisabled, fmt.Sprintf("plan %s is written; deployment validation is disabled", in.ActiveDigest)
	}
	if bad := NotReady(in.Runtime.Status.Releases, in.ActiveReleases); len(bad) > 0 {
		return f, v1alpha1.ReasonNotReady, notReadyMessage(bad, in.ActiveDigest)
	}
	return metav1.ConditionTrue, v1alpha1.ReasonRolledOut, fmt.Sprintf("plan %s is rolled out and ready", in.ActiveDigest)
}

func stalled(in Inputs) (metav1.ConditionStatus, string, string) {
	t := metav1.ConditionTrue
	switch {
	case in.ResolveReason != "" && in.ResolveReason != v1alpha1.ReasonResolving:
		return t, in.ResolveReason, in.ResolveMessage
	case credsBad(in):
		return t, credsReason(in.Credentials), in.Credentials.Message
	}
	if in.InFlight != nil {
		if reason, msg, ok := rollout.StallReason(in.InFlight); ok {
			return t, reason, "rollout " + in.InFlight.Name + ": " + msg
		}
	}
	if in.Last != nil {
		return t, in.Last.Status.Outcome, fmt.Sprintf("rollout %s: %s; change the runtime, or delete the rollout to try the same plan again", in.Last.Name, in.Last.Status.Message)
	}
	return metav1.ConditionFalse, v1alpha1.ReasonNotStalled, "nothing needs a person"
}

func resolved(in Inputs) (metav1.ConditionStatus, string, string) {
	f := metav1.ConditionFalse
	switch {
	case in.ResolveReason == v1alpha1.ReasonResolving:
		return f, v1alpha1.ReasonResolving, "computing the plan"
	case in.ResolveReason != "":
		return f, in.ResolveReason, in.ResolveMessage
	case credsBad(in):
		return f, credsReason(in.Credentials), cmp.Or(in.Credentials.Message, "the registry credentials are not usable")
	}
	return metav1.ConditionTrue, v1alpha1.ReasonResolved, "the spec resolves to plan " + in.DesiredDigest
}

func engine(in Inputs) (metav1.ConditionStatus, string, string) {
	switch {
	case in.Engine == nil:
		return metav1.ConditionUnknown, v1alpha1.ReasonEngineNotReported, "readiness has not reported on Argo CD yet"
	case in.Engine.Available:
		return metav1.ConditionTrue, v1alpha1.ReasonEngineAvailable, cmp.Or(in.Engine.Message, "Argo CD's CRDs and the AppProject exist")
	}
	return metav1.ConditionFalse, cmp.Or(in.Engine.Reason, v1alpha1.ReasonEngineMissing), in.Engine.Message
}

// Progress is status.progress: the in-flight rollout's progress, "" when none.
func Progress(in Inputs) string {
	if in.InFlight == nil {
		return ""
	}
	return rollout.Progress(in.InFlight)
}

// Record sets a runtime's status from what the planner knows: the generation it acted on
// (gen, as the runtime was read for the write), the active and desired plans, the rollout to
// look at (the one in flight, else the last one that ended without success; unchanged when
// neither), the progress, the engine policy, the credentials report, the release list without
// releases that left the active plan, the planner's build, and conds (Conditions(in), through
// Apply).
func Record(st *v1alpha1.ClusterRuntimeStatus, in Inputs, conds []metav1.Condition, gen int64, now time.Time) {
	st.ObservedGeneration = gen
	st.ActivePlan = in.ActiveDigest
	st.DesiredPlan = in.DesiredDigest
	if in.InFlight != nil {
		st.Rollout = in.InFlight.Name
	} else if in.Last != nil {
		st.Rollout = in.Last.Name
	}
	st.Progress = Progress(in)
	if in.EnginePolicy != "" {
		st.EnginePolicy = in.EnginePolicy
	}
	if in.Credentials != nil {
		st.Credentials = CredentialsStatus(in.Credentials)
	}
	st.Releases = PruneHealth(st.Releases, in.ActiveReleases)
	if in.Operator != nil {
		st.Operator = in.Operator.DeepCopy()
	}
	Apply(st, conds, now)
}

// Transition is a condition that changed, worth an Event on the runtime.
type Transition struct {
	// Condition is the condition as written.
	Condition metav1.Condition
	// Warning is true for a condition that needs attention: Stalled=True, or another
	// condition False for a reason other than RollingOut or Resolving (which are progress).
	Warning bool
}

// Transitions returns the conditions of conds whose status or reason differs from before (a
// changed message alone is no transition), in the order of conds.
func Transitions(before, conds []metav1.Condition) []Transition {
	var out []Transition
	for _, c := range conds {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		warn := (v1alpha1.TrueNeedsAPerson(c.Type) && c.Status == metav1.ConditionTrue) ||
			(!v1alpha1.TrueNeedsAPerson(c.Type) && c.Status == metav1.ConditionFalse && c.Reason != v1alpha1.ReasonRollingOut && c.Reason != v1alpha1.ReasonResolving)
		out = append(out, Transition{Condition: c, Warning: warn})
	}
	return out
}

// Apply sets conds on the runtime's status with meta.SetStatusCondition (the transition time
// moves only when a status changes) and reports whether anything changed.
func Apply(st *v1alpha1.ClusterRuntimeStatus, conds []metav1.Condition, now time.Time) bool {
	changed := false
	for _, c := range conds {
		old := meta.FindStatusCondition(st.Conditions, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			continue
		}
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&st.Conditions, c)
		changed = true
	}
	return changed
}

// EngineFromStatus rebuilds the last engine report from a runtime's EngineAvailable condition,
// so a restarted planner knows what it knew (nil when none was recorded).
func EngineFromStatus(st *v1alpha1.ClusterRuntimeStatus) *bus.EngineStatus {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionEngineAvailable)
	if c == nil || c.Status == metav1.ConditionUnknown {
		return nil
	}
	return &bus.EngineStatus{Available: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
}

// CredentialsFromStatus rebuilds the last credentials report from status.credentials and the
// Resolved condition (nil when none was recorded).
func CredentialsFromStatus(st *v1alpha1.ClusterRuntimeStatus) *bus.CredentialsStatus {
	cs := st.Credentials
	if cs == nil {
		return nil
	}
	out := &bus.CredentialsStatus{Mode: cs.Mode, OK: cs.Message == "", Message: cs.Message}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResolved); c != nil &&
		(c.Reason == v1alpha1.ReasonRegistryCredentialsStale || c.Reason == v1alpha1.ReasonRegistryCredentialsUnavailable) {
		out.OK, out.Reason = false, c.Reason
	}
	if cs.ExpiresAt != nil {
		t := cs.ExpiresAt.Time
		out.ExpiresAt = &t
	}
	if cs.RefreshedAt != nil {
		t := cs.RefreshedAt.Time
		out.RefreshedAt = &t
	}
	return out
}

// CredentialsStatus renders a credentials report for status.credentials.
func CredentialsStatus(cs *bus.CredentialsStatus) *v1alpha1.CredentialsStatus {
	if cs == nil {
		return nil
	}
	out := &v1alpha1.CredentialsStatus{Mode: cs.Mode}
	if !cs.OK {
		out.Message = cmp.Or(strings.TrimSpace(cs.Message), "the registry credentials are not usable")
	}
	if cs.ExpiresAt != nil {
		t := metav1.NewTime(cs.ExpiresAt.UTC())
		out.ExpiresAt = &t
	}
	if cs.RefreshedAt != nil {
		t := metav1.NewTime(cs.RefreshedAt.UTC())
		out.RefreshedAt = &t
	}
	return out
}
