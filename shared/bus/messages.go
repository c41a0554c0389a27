package bus

import (
	"fmt"
	"slices"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Message type strings. A type names one JSON shape. A field is added, or one removed, only when
// a receiver of either shape reads a message of the other as its sender meant it (receivers
// ignore unknown fields, and an absent field is its zero value); any other change gets a new
// version.
const (
	TypeApplyCommand      = "aicr.v1.ApplyCommand"
	TypeRemoveCommand     = "aicr.v1.RemoveCommand"
	TypeApplyResult       = "aicr.v1.ApplyResult"
	TypeReleaseVerdict    = "aicr.v1.ReleaseVerdict"
	TypeDriftReport       = "aicr.v1.DriftReport"
	TypeEngineStatus      = "aicr.v1.EngineStatus"
	TypeCredentialsStatus = "aicr.v1.CredentialsStatus"
	TypeAdmissionDenial   = "aicr.v1.AdmissionDenial"
)

// Header starts every message.
type Header struct {
	// Type is one of the Type* constants.
	Type string `json:"type"`
	// ID is the message ID, also sent as Nats-Msg-Id so JetStream drops a duplicate. It is
	// derived from the message's meaning, so a republish after a restart is the same ID.
	ID string `json:"id"`
	// Time is when the message was made.
	Time time.Time `json:"time"`
	// Source is the binary that sent it (its Name constant).
	Source string `json:"source"`
}

// Envelope is implemented by every message type.
type Envelope interface {
	header() *Header
	// MessageType returns the message's Type* constant.
	MessageType() string
}

func (h *Header) header() *Header { return h }

// StepRef identifies the rollout step a command or result belongs to.
type StepRef struct {
	// Rollout is the RuntimeRollout's name; empty for a repair outside any rollout.
	Rollout string `json:"rollout,omitempty"`
	// Index is the step's index in the rollout, from 1; 0 for a repair.
	Index int32 `json:"index,omitempty"`
	// ID is "<rollout>/<index>" for a step, or "repair/<plan digest hex prefix>/<n>" for a
	// repair. The applier writes it into the Application's operator.aicr.run/step annotation.
	ID string `json:"id"`
	// Started is when the step began (the planner's clock, RFC 3339). It orders nothing:
	// planners' clocks may disagree (Seq orders commands).
	Started time.Time `json:"started"`
	// RolloutUID is the RuntimeRollout's UID; empty for a repair. The applier writes it into the
	// Application's operator.aicr.run/step-rollout-uid annotation: it tells apart two rollouts
	// of one name, which ID and Started (one-second precision) may not.
	RolloutUID string `json:"rollout_uid,omitempty"`
	// Seq orders a runtime's commands without clocks: the resourceVersion of the RuntimeRollout
	// the command was decided from (for a rollout step, its rollout as the planner held it when
	// it published the step, which shows the step started). A runtime's rollouts start steps
	// one after the other, and a step starts only once the rollout before it has ended, so every
	// command of a later rollout carries a larger Seq than any command of an earlier one
	// (v1alpha1.CompareSeq). The applier writes it into the Application's
	// operator.aicr.run/step-seq annotation and refuses a command whose Seq is before that of
	// another step that wrote the Application (Outdated). Empty from a planner that predates it,
	// and for a repair decided from no rollout: such a command is ordered by whether its
	// rollout has ended (read from the API server), never by Started.
	Seq string `json:"seq,omitempty"`
}

// ApplyCommand asks the applier to write one release's Application from a stored plan. Build
// it with NewApplyCommand. Whether the release is a readiness gate (and gets an explicit sync)
// is the plan's to say, not the command's.
type ApplyCommand struct {
	Header
	// Runtime is the ClusterRuntime's name.
	Runtime string `json:"runtime"`
	// RuntimeUID is the ClusterRuntime's UID: the ownership proof written on the Application.
	RuntimeUID string `json:"runtime_uid"`
	// Step is the step this write belongs to.
	Step StepRef `json:"step"`
	// Release is the plan release to write (the Application's name).
	Release string `json:"release"`
	// Action is Install, Upgrade or Apply.
	Action v1alpha1.StepAction `json:"action"`
	// PlanDigest names the plan ConfigMap holding the release's chart, values and dependencies.
	PlanDigest string `json:"plan_digest"`
	// SuspendEngine writes automated sync off.
	SuspendEngine bool `json:"suspend_engine,omitempty"`
	// Basis is the Application a repair was decided from (set by the planner's drift check);
	// nil on a rollout step's command, which Step.Seq orders.
	Basis *Basis `json:"basis,omitempty"`
}

// Basis is the Application a repair was decided from, as the planner's drift check read it:
// the repair's ordering token. The applier carries a repair out only on that Application as
// that write left it; one deleted, replaced, or written by another step or repair since is newer
// state than the decision, and the repair is Outdated: nothing is written, and the drift check
// decides again from what is there. Edits by anyone else do not change the basis: the repair
// forces them back too.
type Basis struct {
	// UID is the Application's UID; empty when the check found none (it was deleted).
	UID string `json:"uid,omitempty"`
	// ResourceVersion is the Application's resourceVersion the check read (for people: it
	// names the decision's state in an Outdated result).
	ResourceVersion string `json:"resource_version,omitempty"`
	// Step is the step token (v1alpha1.AnnotatedStepToken) of the write the Application
	// carried: its step and step-rollout-uid annotations.
	Step string `json:"step,omitempty"`
}

// NewApplyCommand returns the command that writes release's Application for step, from the
// plan planDigest, as the runtime of the given name and UID owns it; suspendEngine writes
// automated sync off; basis, for a repair, is the Application it was decided from (nil for a
// rollout step's command). The Publisher stamps the header.
func NewApplyCommand(runtime, runtimeUID string, step StepRef, release string, action v1alpha1.StepAction, planDigest string, suspendEngine bool, basis *Basis) *ApplyCommand {
	return &ApplyCommand{Runtime: runtime, RuntimeUID: runtimeUID, Step: step, Release: release, Action: action,
		PlanDigest: planDigest, SuspendEngine: suspendEngine, Basis: basis}
}

// MessageType implements Envelope.
func (*ApplyCommand) MessageType() string { return TypeApplyCommand }

// Validate is the receiver's check of a delivered command: it names every missing field
// (message ID included, which the Publisher stamps) and an action an ApplyCommand does not carry.
func (c *ApplyCommand) Validate() error {
	if missing := missingFields(map[string]string{"id": c.ID, "runtime": c.Runtime, "runtime_uid": c.RuntimeUID,
		"release": c.Release, "plan_digest": c.PlanDigest, "step.id": c.Step.ID}); len(missing) > 0 {
		return fmt.Errorf("command %s lacks %v", c.ID, missing)
	}
	switch c.Action {
	case v1alpha1.ActionInstall, v1alpha1.ActionUpgrade, v1alpha1.ActionApply:
		return nil
	}
	return fmt.Errorf("action %q: use Install, Upgrade or Apply (Remove is a RemoveCommand)", c.Action)
}

// RemoveCommand asks the applier to run the Remove sequence on one release's Application:
// annotate delete-rollout, add the resources finalizer, delete with a UID precondition on the
// Application whose ownership it just checked. Build it with NewRemoveCommand.
type RemoveCommand struct {
	Header
	// Runtime is the ClusterRuntime's name.
	Runtime string `json:"runtime"`
	// RuntimeUID is the ClusterRuntime's UID; only an Application carrying it is removed.
	RuntimeUID string `json:"runtime_uid"`
	// Step is the approved Remove step.
	Step StepRef `json:"step"`
	// Release is the Application's name.
	Release string `json:"release"`
}

// NewRemoveCommand returns the command that removes release's Application, owned by the runtime
// of the given name and UID, for the approved Remove step. The Publisher stamps the header.
func NewRemoveCommand(runtime, runtimeUID string, step StepRef, release string) *RemoveCommand {
	return &RemoveCommand{Runtime: runtime, RuntimeUID: runtimeUID, Step: step, Release: release}
}

// MessageType implements Envelope.
func (*RemoveCommand) MessageType() string { return TypeRemoveCommand }

// Validate is the receiver's check of a delivered command: it names every missing field
// (message ID included, which the Publisher stamps). A Remove belongs to a rollout step, so
// step.rollout is required.
func (c *RemoveCommand) Validate() error {
	if missing := missingFields(map[string]string{"id": c.ID, "runtime": c.Runtime, "runtime_uid": c.RuntimeUID,
		"release": c.Release, "step.id": c.Step.ID, "step.rollout": c.Step.Rollout}); len(missing) > 0 {
		return fmt.Errorf("command %s lacks %v (a Remove belongs to an approved rollout step)", c.ID, missing)
	}
	return nil
}

// missingFields returns the sorted names of the empty values.
func missingFields(fields map[string]string) []string {
	var missing []string
	for name, v := range fields {
		if v == "" {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing
}

// Apply outcomes.
const (
	// OutcomeWritten: the Application was created or its spec changed.
	OutcomeWritten = "Written"
	// OutcomeRefreshed: the write left the spec unchanged; the refresh annotation was set.
	OutcomeRefreshed = "Refreshed"
	// OutcomeSyncStarted: a readiness release's explicit sync operation was started (or had
	// already been started for this step).
	OutcomeSyncStarted = "SyncStarted"
	// OutcomeRemoved: the Application was deleted (Argo CD now deletes its resources), or was
	// already gone.
	OutcomeRemoved = "Removed"
	// OutcomeForeign: a same-named Application is not ours; nothing was written. Reason is
	// ForeignObject and Message carries the owner evidence.
	OutcomeForeign = "Foreign"
	// OutcomeBlocked: the Application carries the resources finalizer outside an approved
	// Remove step; nothing was written.
	OutcomeBlocked = "Blocked"
	// OutcomeFailed: the command cannot succeed as given (bad plan, invalid object); Reason
	// and Message say why. Transient errors are retried and never reported as Failed.
	OutcomeFailed = "Failed"
	// OutcomeOutdated: a step of a later rollout has written the Application since this
	// command's step started (a command redelivered after the applier stopped before
	// acknowledging it), or, for a repair, the Application is not the one it was decided from
	// any more (Basis); nothing was written or deleted. Message names both.
	OutcomeOutdated = "Outdated"
)

// ApplyResult reasons besides v1alpha1.ReasonForeignObject (Foreign), for Blocked and Failed.
const (
	// ResultReasonFinalizerPresent (Blocked): the Application carries Argo CD's resources
	// finalizer without the operator.aicr.run/delete-rollout annotation.
	ResultReasonFinalizerPresent = "ResourcesFinalizerPresent"
	// ResultReasonPlanUnreadable (Failed): the plan ConfigMap is missing or corrupt, or does not
	// hold the release.
	ResultReasonPlanUnreadable = "PlanUnreadable"
	// ResultReasonInvalidCommand (Failed): the command fails its Validate: a field is missing,
	// or an ApplyCommand names an action it does not carry.
	ResultReasonInvalidCommand = "InvalidCommand"
	// ResultReasonApplicationRejected (Failed): the API server rejected the Application as
	// invalid.
	ResultReasonApplicationRejected = "ApplicationRejected"
)

// ApplyResult is the applier's answer to one command.
type ApplyResult struct {
	Header
	// CommandID is the ID of the command this answers.
	CommandID string `json:"command_id"`
	// Runtime is the ClusterRuntime's name.
	Runtime string `json:"runtime"`
	// Release is the Application's name.
	Release string `json:"release"`
	// Step is the step of the command.
	Step StepRef `json:"step"`
	// Action is the command's action (Remove for a RemoveCommand).
	Action v1alpha1.StepAction `json:"action"`
	// Outcome is one of the Outcome* constants.
	Outcome string `json:"outcome"`
	// Reason is a condition reason for Foreign, Blocked and Failed (ForeignObject, ...).
	Reason string `json:"reason,omitempty"`
	// Message explains the outcome to a person.
	Message string `json:"message,omitempty"`
	// UID is the Application's UID after the write.
	UID string `json:"uid,omitempty"`
	// ResourceVersion is the Application's resourceVersion after the write.
	ResourceVersion string `json:"resource_version,omitempty"`
}

// MessageType implements Envelope.
func (*ApplyResult) MessageType() string { return TypeApplyResult }

// ObservedStatus is what readiness saw of an Application's status, for people reading a verdict.
type ObservedStatus struct {
	// SyncStatus is status.sync.status.
	SyncStatus string `json:"sync_status,omitempty"`
	// Revision is status.sync.revision.
	Revision string `json:"revision,omitempty"`
	// Health is status.health.status.
	Health string `json:"health,omitempty"`
	// OperationPhase is status.operationState.phase.
	OperationPhase string `json:"operation_phase,omitempty"`
	// ReconciledAt is status.reconciledAt.
	ReconciledAt *time.Time `json:"reconciled_at,omitempty"`
	// ResourceVersion is the Application's resourceVersion.
	ResourceVersion string `json:"resource_version,omitempty"`
}

// ReleaseVerdict is readiness's judgement of a release at its current step.
type ReleaseVerdict struct {
	Header
	// Runtime is the ClusterRuntime's name (the Application's runtime label).
	Runtime string `json:"runtime"`
	// Release is the Application's name.
	Release string `json:"release"`
	// StepID is the Application's operator.aicr.run/step annotation: the step judged.
	StepID string `json:"step_id"`
	// RolloutUID is the Application's operator.aicr.run/step-rollout-uid annotation: the UID
	// of the rollout whose step was judged (empty for a repair, or an Application written
	// before the annotation existed).
	RolloutUID string `json:"rollout_uid,omitempty"`
	// PlanDigest is the Application's plan-digest annotation.
	PlanDigest string `json:"plan_digest"`
	// Ready is true when every fence passed.
	Ready bool `json:"ready"`
	// Failed is true when a fence failed (it will not pass without a change).
	Failed bool `json:"failed,omitempty"`
	// Fences, in evaluation order.
	Fences []v1alpha1.Fence `json:"fences"`
	// Observed summarises the status judged.
	Observed ObservedStatus `json:"observed"`
}

// MessageType implements Envelope.
func (*ReleaseVerdict) MessageType() string { return TypeReleaseVerdict }

// Drift kinds.
const (
	// DriftSource: spec.source's repoURL, path, chart or targetRevision differ from the plan.
	DriftSource = "Source"
	// DriftValues: spec.source.helm.valuesObject differs from the plan.
	DriftValues = "Values"
	// DriftDestination: spec.destination differs from the plan.
	DriftDestination = "Destination"
	// DriftOther: another field the operator writes differs (sync policy, labels, ...).
	DriftOther = "Other"
	// DriftAutoSyncDisabled: automated sync was turned off by someone else.
	DriftAutoSyncDisabled = "AutoSyncDisabled"
	// DriftFinalizerAdded: the resources finalizer was added outside a Remove step.
	DriftFinalizerAdded = "FinalizerAdded"
	// DriftDeleted: the owned Application was deleted (outside a Remove step).
	DriftDeleted = "Deleted"
)

// DriftReport says an owned Application no longer matches what the operator wrote.
type DriftReport struct {
	Header
	// Runtime is the ClusterRuntime's name.
	Runtime string `json:"runtime"`
	// Release is the Application's name.
	Release string `json:"release"`
	// PlanDigest is the plan the Application was written from.
	PlanDigest string `json:"plan_digest"`
	// StepID is the step that last wrote it.
	StepID string `json:"step_id,omitempty"`
	// Kinds are Drift* constants, sorted; empty means the drift is gone.
	Kinds []string `json:"kinds"`
	// Fields are the differing field paths, sorted.
	Fields []string `json:"fields,omitempty"`
	// Managers are the field managers that now own fields the operator applied.
	Managers []string `json:"managers,omitempty"`
	// ResourceVersion is the Application's resourceVersion.
	ResourceVersion string `json:"resource_version,omitempty"`
}

// MessageType implements Envelope.
func (*DriftReport) MessageType() string { return TypeDriftReport }

// EngineStatus says whether Argo CD is usable: its CRDs installed and the AppProject present.
type EngineStatus struct {
	Header
	// Available is true when the CRDs and the AppProject exist.
	Available bool `json:"available"`
	// Reason is EngineAvailable, EngineMissing, ProjectMissing or Unauthorized.
	Reason string `json:"reason"`
	// Message explains it.
	Message string `json:"message,omitempty"`
}

// MessageType implements Envelope.
func (*EngineStatus) MessageType() string { return TypeEngineStatus }

// CredentialsStatus reports the registry credentials. It never carries the token.
type CredentialsStatus struct {
	Header
	// Mode is aws or static.
	Mode string `json:"mode"`
	// OK is true when the Secret holds usable credentials.
	OK bool `json:"ok"`
	// Reason is empty when OK, else RegistryCredentialsUnavailable or RegistryCredentialsStale.
	Reason string `json:"reason,omitempty"`
	// Message explains it (never the token).
	Message string `json:"message,omitempty"`
	// RefreshedAt is when the Secret was last written (aws mode).
	RefreshedAt *time.Time `json:"refreshed_at,omitempty"`
	// ExpiresAt is when the token in the Secret expires (aws mode).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// MessageType implements Envelope.
func (*CredentialsStatus) MessageType() string { return TypeCredentialsStatus }

// AdmissionDenial records one request the webhook denied.
type AdmissionDenial struct {
	Header
	// UID is the AdmissionReview request UID.
	UID string `json:"uid"`
	// User is the requesting user.
	User string `json:"user"`
	// Operation is CREATE, UPDATE or DELETE.
	Operation string `json:"operation"`
	// Resource is "<group>/<resource>".
	Resource string `json:"resource"`
	// Namespace and Name of the object.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Rule names the rule that denied.
	Rule string `json:"rule"`
	// Field is the offending field path.
	Field string `json:"field,omitempty"`
	// Message is what the user was told.
	Message string `json:"message"`
}

// MessageType implements Envelope.
func (*AdmissionDenial) MessageType() string { return TypeAdmissionDenial }
