package rollout

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Defaults for RolloutSettings fields left empty.
const (
	DefaultParallelism   = 1
	DefaultActionTimeout = 15 * time.Minute
	DefaultDeadline      = 6 * time.Hour
	// BlockedRetryInterval is how often a Blocked step's command is published again, so a
	// person who removed the foreign Application or the finalizer sees the step resume
	// without waiting for the action timeout.
	BlockedRetryInterval = time.Minute
)

// ConditionDrifted is the rollout condition that records Applications edited during the
// rollout (source, values or destination), with reason InventoryDrift. Its message is the
// durable list "<release>: <kind>,<kind>; ...", read back by Drifted.
const ConditionDrifted = "InventoryDrift"

// Hold stops new steps from starting; steps in flight go on.
type Hold struct {
	// Reason is a v1alpha1 reason constant (Paused, EngineMissing, ...).
	Reason string
	// Message says what to do about it.
	Message string
}

// Env is what the scheduler needs to know besides the rollout.
type Env struct {
	// Now is the planner's clock.
	Now time.Time
	// Parallelism is how many steps may be in flight (DefaultParallelism when < 1).
	Parallelism int
	// ActionTimeout bounds each step (DefaultActionTimeout when zero).
	ActionTimeout time.Duration
	// ValidationDisabled makes a forward step done once its write succeeded.
	ValidationDisabled bool
	// Hold, when set, stops new steps from starting.
	Hold *Hold
	// Identities are the operator's own identities: approvals by them are ignored.
	Identities []string
	// CredentialsExpireAt is when the registry token expires (zero: unknown or never). A
	// forward step whose action timeout would outlive it does not start.
	CredentialsExpireAt time.Time
}

func (e Env) parallelism() int {
	if e.Parallelism < 1 {
		return DefaultParallelism
	}
	return e.Parallelism
}

func (e Env) timeout() time.Duration {
	if e.ActionTimeout <= 0 {
		return DefaultActionTimeout
	}
	return e.ActionTimeout
}

// Start is a command to publish for a step.
type Start struct {
	// Index is the step's index (from 1).
	Index int32
	// Attempt distinguishes publications of the same step: "1" first, "2"... for a Blocked
	// step's retries, "drift-<rv>" for a write forced back during the step.
	Attempt string
}

// Result says what Advance did.
type Result struct {
	// Started are the steps started in this call: publish their commands.
	Started []Start
	// Ended is the outcome when the rollout ended in this call.
	Ended string
	// Wake is when the rollout needs looking at again (a timeout, a deadline, an expiry, a
	// retry); zero when only news can move it.
	Wake time.Time
}

// Name returns the deterministic rollout name for a move from one plan to another: "r-", the
// first 10 hex digits of to (or "none" for a runtime deletion), "-", the same of from (or
// "none" for a first install). Creating it again after a restart is a no-op.
func Name(fromDigest, toDigest string) string {
	return "r-" + short(toDigest) + "-" + short(fromDigest)
}

func short(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if h == "" {
		return "none"
	}
	if len(h) > 10 {
		h = h[:10]
	}
	return h
}

// CommandID is a command's message ID, "<stepID>/<attempt>/<8 characters of the rollout's
// UID>": a republish of the same attempt after a crash is dropped by JetStream's
// de-duplication, while a rollout of the same name created again (a person deleted a failed one
// to retry the move) publishes its steps anew instead of being dropped as their duplicate.
func CommandID(stepID, attempt string, rolloutUID types.UID) string {
	id := stepID + "/" + attempt
	if u := strings.ReplaceAll(string(rolloutUID), "-", ""); u != "" {
		id += "/" + u[:min(8, len(u))]
	}
	return id
}

// Started reports whether any step of the rollout has been started.
func Started(r *v1alpha1.RuntimeRollout) bool {
	for i := range r.Status.Steps {
		if r.Status.Steps[i].StartedAt != nil {
			return true
		}
	}
	return false
}

// Initialize sets a new rollout's steps and phase Pending. It does nothing to a rollout that
// already has a phase.
func Initialize(r *v1alpha1.RuntimeRollout, steps []v1alpha1.Step) {
	if r.Status.Phase != "" {
		return
	}
	r.Status.Steps = steps
	r.Status.Sequence = r.ResourceVersion
	r.Status.Phase = v1alpha1.PhasePending
	r.Status.ObservedGeneration = r.Generation
	r.Status.Message = fmt.Sprintf("%d steps planned", len(steps))
}

// Supersede ends a rollout that has not started a step, because a newer plan replaces it. It
// reports whether it did.
func Supersede(r *v1alpha1.RuntimeRollout, newer string, now time.Time) bool {
	if r.Status.Phase.Terminal() || Started(r) {
		return false
	}
	if r.Status.Phase == "" {
		r.Status.Sequence = r.ResourceVersion // its first status write, as in Initialize
	}
	end(r, v1alpha1.PhaseSuperseded, v1alpha1.OutcomeSuperseded, fmt.Sprintf("superseded by plan %s before any step started", newer), now)
	return true
}

// step returns the step at index (1-based), or nil.
func step(r *v1alpha1.RuntimeRollout, index int32) *v1alpha1.Step {
	i := int(index) - 1
	if i < 0 || i >= len(r.Status.Steps) || r.Status.Steps[i].Index != index {
		for j := range r.Status.Steps { // tolerate a hand-edited order
			if r.Status.Steps[j].Index == index {
				return &r.Status.Steps[j]
			}
		}
		return nil
	}
	return &r.Status.Steps[i]
}

// StepFor returns the step of a release, or nil.
func StepFor(r *v1alpha1.RuntimeRollout, release string) *v1alpha1.Step {
	for i := range r.Status.Steps {
		if r.Status.Steps[i].Release == release {
			return &r.Status.Steps[i]
		}
	}
	return nil
}

func inFlight(s *v1alpha1.Step) bool {
	return s.State == v1alpha1.StepInProgress || s.State == v1alpha1.StepBlocked
}

func mt(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func end(r *v1alpha1.RuntimeRollout, phase v1alpha1.RolloutPhase, outcome, msg string, now time.Time) {
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if inFlight(s) {
			s.State = v1alpha1.StepFailed
			s.FinishedAt = mt(now)
			s.Reason = outcome
			s.Message = "the rollout ended while this step was in flight: " + msg
		}
	}
	r.Status.Phase = phase
	r.Status.Outcome = outcome
	r.Status.FinishedAt = mt(now)
	r.Status.Message = msg
	stalled := metav1.ConditionFalse
	reason := v1alpha1.ReasonNotStalled
	switch outcome {
	case v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked:
		stalled, reason = metav1.ConditionTrue, outcome
	case v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeSuperseded:
		meta.RemoveStatusCondition(&r.Status.Conditions, ConditionDrifted)
	}
	setCondition(r, v1alpha1.ConditionStalled, stalled, reason, msg, now)
}

func setCondition(r *v1alpha1.RuntimeRollout, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	if len(msg) > 2048 {
		msg = msg[:2045] + "..."
	}
	meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: r.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// depsDone reports whether every step a step waits for has succeeded. A Remove step also
// waits for every forward step: nothing is removed before the new plan is in place.
func depsDone(r *v1alpha1.RuntimeRollout, s *v1alpha1.Step, byRelease map[string]*v1alpha1.Step) bool {
	for _, d := range s.DependsOn {
		if ds, ok := byRelease[d]; ok && ds.State != v1alpha1.StepSucceeded {
			return false
		}
	}
	if s.Action == v1alpha1.ActionRemove {
		for i := range r.Status.Steps {
			o := &r.Status.Steps[i]
			if o.Action != v1alpha1.ActionRemove && o.State != v1alpha1.StepSucceeded {
				return false
			}
		}
	}
	return true
}

// Advance moves a rollout as far as it can go at env.Now: it ends it on a revoked approval,
// a passed deadline, a step past its action timeout or a failed step; marks it Succeeded when
// every step succeeded; otherwise starts every step whose dependencies succeeded, in index
// order, up to the parallelism (Remove steps only with a valid approval), unless a hold, a
// blocked step or inventory drift stops new steps. Calling it again changes nothing.
func Advance(r *v1alpha1.RuntimeRollout, env Env) Result {
	var res Result
	if r.Status.Phase.Terminal() || r.Status.Phase == "" {
		return res
	}
	now := env.Now
	approval := EvaluateApproval(r, env.Identities, now)
	if approval.State == ApprovalRevoked {
		end(r, v1alpha1.PhaseRevoked, v1alpha1.OutcomeRevoked, approval.Message, now)
		res.Ended = v1alpha1.OutcomeRevoked
		return res
	}
	if d := r.Spec.Deadline; d != nil && !now.Before(d.Time) {
		end(r, v1alpha1.PhaseExpired, v1alpha1.OutcomeExpired,
			fmt.Sprintf("the rollout passed its deadline %s with %s", d.UTC().Format(time.RFC3339), remaining(r)), now)
		res.Ended = v1alpha1.OutcomeExpired
		return res
	}
	timeout := env.timeout()
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if inFlight(s) && s.StartedAt != nil && !now.Before(s.StartedAt.Add(timeout)) {
			msg := timeoutMessage(s, timeout)
			s.State, s.Reason, s.Message, s.FinishedAt = v1alpha1.StepFailed, v1alpha1.ReasonRolloutFailed, msg, mt(now)
		}
	}
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if s.State == v1alpha1.StepFailed {
			end(r, v1alpha1.PhaseFailed, v1alpha1.OutcomeFailed,
				fmt.Sprintf("step %d/%d %s (%s) failed: %s", s.Index, len(r.Status.Steps), s.Release, s.Action, s.Message), now)
			res.Ended = v1alpha1.OutcomeFailed
			return res
		}
	}
	allDone := true
	for i := range r.Status.Steps {
		if r.Status.Steps[i].State != v1alpha1.StepSucceeded {
			allDone = false
			break
		}
	}
	if allDone {
		end(r, v1alpha1.PhaseSucceeded, v1alpha1.OutcomeSucceeded, fmt.Sprintf("%d steps succeeded", len(r.Status.Steps)), now)
		res.Ended = v1alpha1.OutcomeSucceeded
		return res
	}

	byRelease := make(map[string]*v1alpha1.Step, len(r.Status.Steps))
	running := 0
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		byRelease[s.Release] = s
		if inFlight(s) {
			running++
		}
	}
	hold := env.Hold
	if hold == nil {
		hold = stallHold(r)
	}
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if s.State != v1alpha1.StepPending && s.State != v1alpha1.StepAwaitingApproval {
			continue
		}
		if !depsDone(r, s, byRelease) {
			continue
		}
		if s.Action == v1alpha1.ActionRemove && approval.State != ApprovalValid {
			s.State, s.Reason, s.Message = v1alpha1.StepAwaitingApproval, v1alpha1.ReasonAwaitingApproval, approval.Message
			continue
		}
		if s.State == v1alpha1.StepAwaitingApproval {
			s.State, s.Reason, s.Message = v1alpha1.StepPending, "", approval.Message
		}
		if hold != nil || running >= env.parallelism() {
			continue
		}
		if s.Action != v1alpha1.ActionRemove && !env.CredentialsExpireAt.IsZero() && now.Add(timeout).After(env.CredentialsExpireAt) {
			hold = &Hold{Reason: v1alpha1.ReasonRegistryCredentialsStale, Message: fmt.Sprintf(
				"the registry token expires at %s, before a step started now would reach its action timeout %s; waiting for fresh credentials",
				env.CredentialsExpireAt.UTC().Format(time.RFC3339), timeout)}
			continue
		}
		s.State, s.Reason, s.Message = v1alpha1.StepInProgress, "", "command published; waiting for the release to be ready"
		s.StartedAt = mt(now)
		if r.Status.StartedAt == nil {
			r.Status.StartedAt = mt(now)
		}
		running++
		res.Started = append(res.Started, Start{Index: s.Index, Attempt: "1"})
	}
	summarize(r, hold, now)
	res.Wake = wake(r, approval, timeout, now)
	return res
}

// stallHold is the hold a stalled rollout puts on new steps: a blocked step or inventory drift.
func stallHold(r *v1alpha1.RuntimeRollout) *Hold {
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if s.State == v1alpha1.StepBlocked {
			return &Hold{Reason: s.Reason, Message: fmt.Sprintf("step %d %s is blocked: %s", s.Index, s.Release, s.Message)}
		}
	}
	if d := Drifted(r); len(d) > 0 {
		return &Hold{Reason: v1alpha1.ReasonInventoryDrift, Message: driftMessage(d)}
	}
	return nil
}

func remaining(r *v1alpha1.RuntimeRollout) string {
	done := 0
	for i := range r.Status.Steps {
		if r.Status.Steps[i].State == v1alpha1.StepSucceeded {
			done++
		}
	}
	return fmt.Sprintf("%d of %d steps done", done, len(r.Status.Steps))
}

func timeoutMessage(s *v1alpha1.Step, timeout time.Duration) string {
	switch {
	case s.State == v1alpha1.StepBlocked:
		return fmt.Sprintf("still blocked (%s) at the action timeout %s: %s", s.Reason, timeout, s.Message)
	case s.Reason == v1alpha1.ReasonSpecDrifted:
		msg, _, _ := strings.Cut(s.Message, "; undo the edit")
		return fmt.Sprintf("%s: SpecDrifted, and the edit was not undone within the action timeout %s", msg, timeout)
	case s.Action == v1alpha1.ActionRemove:
		return fmt.Sprintf("the Application was not removed within the action timeout %s", timeout)
	}
	return fmt.Sprintf("not ready within the action timeout %s%s", timeout, openFences(s.Verdict))
}

func openFences(v *v1alpha1.Verdict) string {
	if v == nil {
		return "; no verdict from readiness"
	}
	var open []string
	for _, f := range v.Fences {
		if f.State != v1alpha1.FencePassed {
			open = append(open, f.Name+" "+string(f.State))
		}
	}
	if len(open) == 0 {
		return ""
	}
	return "; fences not passed: " + strings.Join(open, ", ")
}

// summarize sets the phase, message and Stalled condition of a rollout in flight.
func summarize(r *v1alpha1.RuntimeRollout, hold *Hold, now time.Time) {
	phase := v1alpha1.PhasePending
	if Started(r) {
		phase = v1alpha1.PhaseProgressing
	}
	stalled, reason, msg := false, "", ""
	var awaiting, drifted *v1alpha1.Step
	anyRunning := false
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		switch {
		case s.State == v1alpha1.StepBlocked && !stalled:
			stalled, reason, msg = true, s.Reason, fmt.Sprintf("step %d/%d %s (%s) is blocked: %s", s.Index, len(r.Status.Steps), s.Release, s.Action, s.Message)
		case s.State == v1alpha1.StepAwaitingApproval && awaiting == nil:
			awaiting = s
		case s.State == v1alpha1.StepInProgress:
			anyRunning = true
			if s.Reason == v1alpha1.ReasonSpecDrifted && drifted == nil {
				drifted = s
			}
		}
	}
	if d := Drifted(r); !stalled && len(d) > 0 {
		stalled, reason, msg = true, v1alpha1.ReasonInventoryDrift, driftMessage(d)
	}
	if !stalled && drifted != nil {
		stalled, reason, msg = true, v1alpha1.ReasonSpecDrifted, fmt.Sprintf(
			"step %d/%d %s: %s", drifted.Index, len(r.Status.Steps), drifted.Release, drifted.Message)
	}
	switch {
	case stalled:
		phase = v1alpha1.PhaseStalled
	case awaiting != nil && !anyRunning:
		phase = v1alpha1.PhaseAwaitingApproval
		stalled, reason, msg = true, v1alpha1.ReasonAwaitingApproval, fmt.Sprintf(
			"step %d/%d %s (Remove): %s", awaiting.Index, len(r.Status.Steps), awaiting.Release, awaiting.Message)
	case anyRunning:
		msg = Progress(r)
	case hold != nil:
		msg = "no step starts: " + hold.Message
	default:
		msg = remaining(r)
	}
	r.Status.Phase = phase
	r.Status.Message = msg
	if stalled {
		setCondition(r, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg, now)
	} else {
		setCondition(r, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotStalled, msg, now)
	}
}

// StallReason returns the Stalled reason and message of a rollout, if it needs a person.
func StallReason(r *v1alpha1.RuntimeRollout) (reason, msg string, ok bool) {
	c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", "", false
	}
	return c.Reason, c.Message, true
}

func wake(r *v1alpha1.RuntimeRollout, approval Approval, timeout time.Duration, now time.Time) time.Time {
	var w time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (w.IsZero() || t.Before(w)) {
			w = t
		}
	}
	if r.Spec.Deadline != nil {
		consider(r.Spec.Deadline.Time)
	}
	removesLeft := false
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if inFlight(s) && s.StartedAt != nil {
			consider(s.StartedAt.Add(timeout))
		}
		if s.State == v1alpha1.StepBlocked && s.StartedAt != nil {
			consider(s.StartedAt.Add(BlockedRetryInterval * time.Duration(blockedAttempt(s, now)))) // next retry
		}
		if s.Action == v1alpha1.ActionRemove && s.State != v1alpha1.StepSucceeded {
			removesLeft = true
		}
	}
	if removesLeft && approval.State == ApprovalValid {
		consider(approval.ExpiresAt)
	}
	return w
}

// blockedAttempt is the attempt number a Blocked step's command carries at its last retry:
// 1 + the number of BlockedRetryInterval periods since it started. It is a function of the
// start time and the clock only, so a restarted planner republishes the same ID.
func blockedAttempt(s *v1alpha1.Step, now time.Time) int {
	return 1 + int(now.Sub(s.StartedAt.Time)/BlockedRetryInterval)
}

// Outstanding lists the commands of every step in flight: an InProgress step's first attempt
// and a Blocked step's current retry. The caller publishes those it has not published yet;
// JetStream drops a duplicate ID within its window and the applier is idempotent beyond it.
func Outstanding(r *v1alpha1.RuntimeRollout, now time.Time) []Start {
	if r.Status.Phase.Terminal() {
		return nil
	}
	var out []Start
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		switch {
		case s.State == v1alpha1.StepInProgress:
			out = append(out, Start{Index: s.Index, Attempt: "1"})
		case s.State == v1alpha1.StepBlocked && s.StartedAt != nil:
			out = append(out, Start{Index: s.Index, Attempt: strconv.Itoa(blockedAttempt(s, now))})
		}
	}
	return out
}

// Step returns the step with index, or nil.
func Step(r *v1alpha1.RuntimeRollout, index int32) *v1alpha1.Step { return step(r, index) }

// Progress reads like "step 9/18 gpu-operator (Upgrade)" for the first step in flight, with
// "(+2 more in flight)" when more run, or names the step that waits for approval.
func Progress(r *v1alpha1.RuntimeRollout) string {
	n := len(r.Status.Steps)
	var running []*v1alpha1.Step
	var awaiting *v1alpha1.Step
	for i := range r.Status.Steps {
		s := &r.Status.Steps[i]
		if inFlight(s) {
			running = append(running, s)
		}
		if s.State == v1alpha1.StepAwaitingApproval && awaiting == nil {
			awaiting = s
		}
	}
	switch {
	case len(running) > 0:
		s := running[0]
		p := fmt.Sprintf("step %d/%d %s (%s)", s.Index, n, s.Release, s.Action)
		if len(running) > 1 {
			p += fmt.Sprintf(" (+%d more in flight)", len(running)-1)
		}
		return p
	case awaiting != nil:
		return fmt.Sprintf("step %d/%d %s (Remove): awaiting approval", awaiting.Index, n, awaiting.Release)
	}
	return remaining(r)
}

// Drifted returns the releases recorded as edited during the rollout, with their drift kinds.
func Drifted(r *v1alpha1.RuntimeRollout) map[string][]string {
	c := meta.FindStatusCondition(r.Status.Conditions, ConditionDrifted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	out := map[string][]string{}
	for _, part := range strings.Split(c.Message, "; ") {
		name, kinds, ok := strings.Cut(part, ": ")
		if !ok || name == "" {
			continue
		}
		out[name] = strings.Split(kinds, ",")
	}
	return out
}

func setDrifted(r *v1alpha1.RuntimeRollout, d map[string][]string, now time.Time) {
	if len(d) == 0 {
		meta.RemoveStatusCondition(&r.Status.Conditions, ConditionDrifted)
		return
	}
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+": "+strings.Join(d[n], ","))
	}
	setCondition(r, ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonInventoryDrift, strings.Join(parts, "; "), now)
}

func driftMessage(d map[string][]string) string {
	names := make([]string, 0, len(d))
	for n, k := range d {
		names = append(names, fmt.Sprintf("%s (%s)", n, strings.Join(k, ", ")))
	}
	sort.Strings(names)
	return "owned Applications were edited during the rollout: " + strings.Join(names, "; ") +
		"; undo the edit (readiness reports the drift gone) or change the runtime instead"
}
