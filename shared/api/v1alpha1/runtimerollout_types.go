package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StepAction is what a step does to its release.
// +kubebuilder:validation:Enum=Install;Upgrade;Apply;Remove
type StepAction string

const (
	// ActionInstall writes a release that the previous plan did not have.
	ActionInstall StepAction = "Install"
	// ActionUpgrade writes a release at a new chart digest or with new values.
	ActionUpgrade StepAction = "Upgrade"
	// ActionApply writes a release whose chart and values did not change (an engine policy
	// move, a readiness release's explicit sync, or a repair).
	ActionApply StepAction = "Apply"
	// ActionRemove deletes a release that left the plan. It needs an approval.
	ActionRemove StepAction = "Remove"
)

// StepState is where a step is.
// +kubebuilder:validation:Enum=Pending;AwaitingApproval;InProgress;Succeeded;Failed;Blocked
type StepState string

const (
	// StepPending waits for its dependencies (or for a free slot).
	StepPending StepState = "Pending"
	// StepAwaitingApproval is a Remove step whose approval is missing, expired or revoked.
	StepAwaitingApproval StepState = "AwaitingApproval"
	// StepInProgress has had its command published and waits for a ready verdict.
	StepInProgress StepState = "InProgress"
	// StepSucceeded was judged ready at the current revision (or removed).
	StepSucceeded StepState = "Succeeded"
	// StepFailed passed its action timeout, or was refused.
	StepFailed StepState = "Failed"
	// StepBlocked needs a person (a foreign object, drift); the message says what.
	StepBlocked StepState = "Blocked"
)

// RolloutPhase is where a rollout is.
// +kubebuilder:validation:Enum=Pending;Progressing;AwaitingApproval;Stalled;Succeeded;Failed;Expired;Revoked;Superseded
type RolloutPhase string

// The phases of a rollout, in status.phase.
const (
	PhasePending          RolloutPhase = "Pending"
	PhaseProgressing      RolloutPhase = "Progressing"
	PhaseAwaitingApproval RolloutPhase = "AwaitingApproval"
	PhaseStalled          RolloutPhase = "Stalled"
	PhaseSucceeded        RolloutPhase = "Succeeded"
	PhaseFailed           RolloutPhase = "Failed"
	PhaseExpired          RolloutPhase = "Expired"
	PhaseRevoked          RolloutPhase = "Revoked"
	PhaseSuperseded       RolloutPhase = "Superseded"
)

// Terminal reports whether the phase is final: a rollout in it never moves again.
func (p RolloutPhase) Terminal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseRevoked, PhaseSuperseded:
		return true
	}
	return false
}

// Outcome values, set as LabelOutcome once a rollout ends.
const (
	OutcomeSucceeded  = "RolloutSucceeded"
	OutcomeFailed     = ReasonRolloutFailed
	OutcomeExpired    = ReasonRolloutExpired
	OutcomeRevoked    = ReasonRolloutRevoked
	OutcomeSuperseded = "RolloutSuperseded"
)

// RuntimeRolloutSpec is one change the operator makes to the stack, between two plans. The
// planner creates it; only a person sets the approval.
type RuntimeRolloutSpec struct {
	// Runtime is the ClusterRuntime this rollout changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Runtime string `json:"runtime"`
	// RuntimeUID is the UID of that ClusterRuntime.
	// +kubebuilder:validation:MaxLength=64
	RuntimeUID string `json:"runtimeUID"`
	// FromDigest is the plan the stack is at ("" when nothing was rolled out yet).
	// +optional
	// +kubebuilder:validation:MaxLength=71
	FromDigest string `json:"fromDigest,omitempty"`
	// ToDigest is the plan the stack moves to ("" when the runtime is being deleted).
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ToDigest string `json:"toDigest,omitempty"`
	// Reason says why the rollout exists: PlanChanged, EnginePolicyChanged or RuntimeDeleted.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason,omitempty"`
	// Deadline is when the rollout expires.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Approval is set once, by a person. It covers the rollout's Remove steps.
	// +optional
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is a person's consent to a rollout's Remove steps.
type Approval struct {
	// ApprovedBy is who approved; admission fills it from the request's user.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ApprovedBy string `json:"approvedBy"`
	// Reason says why.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// ApprovedAt is when.
	// +optional
	ApprovedAt *metav1.Time `json:"approvedAt,omitempty"`
	// ExpiresAt ends the approval; the rollout's deadline when unset.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Revoked withdraws the approval; the rollout then ends RolloutRevoked.
	// +optional
	Revoked *Revocation `json:"revoked,omitempty"`
}

// Revocation withdraws an approval.
type Revocation struct {
	// RevokedBy is who revoked.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	RevokedBy string `json:"revokedBy"`
	// Reason says why; it is required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// RevokedAt is when.
	// +optional
	RevokedAt *metav1.Time `json:"revokedAt,omitempty"`
}

// Step is one action on one release.
type Step struct {
	// Index is the step's place in the rollout, from 1.
	Index int32 `json:"index"`
	// Release is the plan release (and Application name).
	// +kubebuilder:validation:MaxLength=63
	Release string `json:"release"`
	// Action is what the step does.
	Action StepAction `json:"action"`
	// ReadinessGate marks a readiness release, synced explicitly in its step.
	// +optional
	ReadinessGate bool `json:"readinessGate,omitempty"`
	// DependsOn lists the releases (of this rollout) that must be done first.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	DependsOn []string `json:"dependsOn,omitempty"`
	// State is where the step is.
	State StepState `json:"state"`
	// StartedAt is when the step's command was first published.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// FinishedAt is when the step reached Succeeded or Failed.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Reason is a machine-readable reason for the state (a Reason* constant).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason,omitempty"`
	// Message says what the step waits for or why it failed.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// Verdict is readiness's latest judgement of the release.
	// +optional
	Verdict *Verdict `json:"verdict,omitempty"`
	// DriftResourceVersion is the Application's resourceVersion at which readiness reported its
	// source, values or destination edited during this step (reason SpecDrifted). Only a
	// verdict on a later version, or a report that the drift ended seen later, counts.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DriftResourceVersion string `json:"driftResourceVersion,omitempty"`
}

// FenceState is the state of one readiness fence.
// +kubebuilder:validation:Enum=Passed;Open;Failed
type FenceState string

const (
	// FencePassed means the fence holds for this observation.
	FencePassed FenceState = "Passed"
	// FenceOpen means not yet; it may still pass.
	FenceOpen FenceState = "Open"
	// FenceFailed means it will not pass without a change (an error condition, a failed sync).
	FenceFailed FenceState = "Failed"
)

// Fence names, in the order readiness evaluates them.
const (
	// FenceComparedToSpec: status.sync.comparedTo equals the spec (source with values,
	// destination): the status describes our write.
	FenceComparedToSpec = "ComparedToSpec"
	// FenceSyncedAtRevision: sync.status is Synced and sync.revision is the plan's chart digest.
	FenceSyncedAtRevision = "SyncedAtRevision"
	// FenceSyncedAfterStep: a sync of this spec finished (operation absent, phase Succeeded,
	// syncResult equal to the spec) after the step began, or the refresh handshake proved a
	// comparison after the step began when the step changed nothing.
	FenceSyncedAfterStep = "SyncedAfterStep"
	// FenceHealthy: health.status is Healthy.
	FenceHealthy = "Healthy"
	// FenceNoErrorCondition: no ComparisonError, SyncError or InvalidSpecError.
	FenceNoErrorCondition = "NoErrorCondition"
	// FenceGateSynced: for a readiness release, the sync operation the step started (initiated
	// by aicr-operator) is the one that succeeded.
	FenceGateSynced = "GateSynced"
)

// Fence is one condition of "ready at the current revision".
type Fence struct {
	// Name is a Fence* constant.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// State is Passed, Open or Failed.
	State FenceState `json:"state"`
	// Message says what was seen.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Verdict is readiness's judgement of one observation of an Application.
type Verdict struct {
	// Ready is true when every fence passed.
	Ready bool `json:"ready"`
	// ObservedAt is when readiness saw the Application.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// ResourceVersion is the Application's resourceVersion readiness judged: it orders verdicts
	// and drift reports that arrive out of order.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Fences, each with its state.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Fences []Fence `json:"fences,omitempty"`
}

// RuntimeRolloutStatus holds the rollout's progress.
type RuntimeRolloutStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the rollout is.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Steps holds, in index order, every step whose state is not recorded elsewhere: with
	// StepRecords unset, all of them; with it set, only the steps that left Pending (or carry
	// a reason or message) and are not in a finished batch: the steps in flight, blocked,
	// awaiting approval or failed, and those finished since the last batch. A step listed
	// here supersedes its definition and any batch that holds it. Read the whole list with
	// shared/rolloutsteps (kubectl aicr describe does).
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	Steps []Step `json:"steps,omitempty"`
	// StepRecords names the immutable ConfigMaps that hold the steps Steps leaves out, so the
	// object written at each step does not grow with the rollout.
	// +optional
	StepRecords *StepRecords `json:"stepRecords,omitempty"`
	// StepCounts counts every step of the rollout by state.
	// +optional
	StepCounts *StepCounts `json:"stepCounts,omitempty"`
	// Sequence orders the runtime's rollouts by creation without a clock: the rollout's
	// resourceVersion when the planner first wrote its status, right after creating it. The
	// API server hands resourceVersions out in increasing order (CompareSeq), so a later
	// rollout has a larger one; timestamps, to the second, tie. Empty on a rollout an earlier
	// planner wrote.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Sequence string `json:"sequence,omitempty"`
	// StartedAt is when the first step started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// FinishedAt is when the rollout ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Outcome is set once the rollout ended (an Outcome* value).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Outcome string `json:"outcome,omitempty"`
	// Message says what the rollout waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// Conditions: Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StepRecords names the ConfigMaps, in Namespace, that hold a rollout's steps outside its
// status. Each is immutable, written once before the status write that relies on it, and owned
// by the rollout (deleted with it).
type StepRecords struct {
	// Namespace holds the ConfigMaps (the operator namespace).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Definitions is the ConfigMap with every step as the rollout created it (Pending): its
	// index, release, action, readiness gate and dependencies.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Definitions string `json:"definitions"`
	// FinishedBatches is how many ConfigMaps of finished steps exist: "<definitions>-1" to
	// "<definitions>-<n>", each holding the steps that finished between two batches, as they
	// finished (verdict, times, reason).
	// +optional
	// +kubebuilder:validation:Minimum=0
	FinishedBatches int32 `json:"finishedBatches,omitempty"`
}

// StepCounts counts a rollout's steps by state.
type StepCounts struct {
	// Total is the number of steps.
	Total int32 `json:"total"`
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	AwaitingApproval int32 `json:"awaitingApproval,omitempty"`
	// +optional
	InProgress int32 `json:"inProgress,omitempty"`
	// +optional
	Blocked int32 `json:"blocked,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// RuntimeRollout is one change the operator makes to the stack, between two plans.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=aicrro
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.fromDigest`,priority=1
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.toDigest`,priority=1
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.stepCounts.succeeded`
// +kubebuilder:printcolumn:name="Steps",type=integer,JSONPath=`.status.stepCounts.total`
// +kubebuilder:printcolumn:name="Approved By",type=string,JSONPath=`.spec.approval.approvedBy`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RuntimeRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RuntimeRolloutSpec   `json:"spec"`
	Status RuntimeRolloutStatus `json:"status,omitempty"`
}

// RuntimeRolloutList is a list of RuntimeRollouts.
//
// +kubebuilder:object:root=true
type RuntimeRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RuntimeRollout `json:"items"`
}
