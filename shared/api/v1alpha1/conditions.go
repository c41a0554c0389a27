package v1alpha1

// Condition types on ClusterRuntime (and Stalled on RuntimeRollout).
const (
	ConditionReady           = "Ready"
	ConditionStalled         = "Stalled"
	ConditionResolved        = "Resolved"
	ConditionEngineAvailable = "EngineAvailable"
	// ConditionMessagesParked is True while the parked stream holds messages whose handling kept
	// failing (bus.StreamParked); it appears once something was parked.
	ConditionMessagesParked = "MessagesParked"
)

// MessagesParked reasons.
const (
	// ReasonMessageParked: a dispatch loop gave up on a message after bus.ParkAfter failed
	// handlings; the message names it, where it came from and the error. kubectl aicr parked
	// --retry (AnnotationRetryParked) sends it back.
	ReasonMessageParked = "MessageParked"
	// ReasonNoMessagesParked: the parked stream is empty again.
	ReasonNoMessagesParked = "NoMessagesParked"
)

// TrueNeedsAPerson says whether a runtime condition of type t needs a person when True
// (Stalled, MessagesParked); every other condition needs one when False.
func TrueNeedsAPerson(t string) bool {
	return t == ConditionStalled || t == ConditionMessagesParked
}

// Ready reasons.
const (
	ReasonRolledOut               = "RolledOut"
	ReasonValidationDisabled      = "ValidationDisabled"
	ReasonRollingOut              = "RollingOut"
	ReasonNotReady                = "NotReady"
	ReasonNoActivePlan            = "NoActivePlan"
	ReasonPaused                  = "Paused"
	ReasonEngineSuspended         = "EngineSuspended"
	ReasonEngineSuspensionRefused = "EngineSuspensionRefused"
	ReasonPlanUnreadable          = "PlanUnreadable"
	ReasonDeleting                = "Deleting"
)

// Stalled reasons: each names the runbook a person follows.
const (
	ReasonAwaitingApproval        = "AwaitingApproval"
	ReasonAwaitingAcknowledgement = "AwaitingAcknowledgement"
	ReasonTransitionBlocked       = "TransitionBlocked"
	ReasonInventoryDrift          = "InventoryDrift"
	ReasonStepUnknown             = "StepUnknown"
	ReasonMovedReleaseMissing     = "MovedReleaseMissing"
	ReasonForeignObject           = "ForeignObject"
	ReasonRolloutFailed           = "RolloutFailed"
	ReasonRolloutExpired          = "RolloutExpired"
	ReasonRolloutRevoked          = "RolloutRevoked"
	ReasonSpecDrifted             = "SpecDrifted"
	// ReasonNotStalled is the Stalled=False reason when nothing needs a person.
	ReasonNotStalled = "Progressing"
)

// Resolved reasons. Any False reason but Resolving also stalls the runtime.
const (
	ReasonResolved                       = "Resolved"
	ReasonResolving                      = "Resolving"
	ReasonInvalidOverride                = "InvalidOverride"
	ReasonOverridePathUnknown            = "OverridePathUnknown"
	ReasonInvalidPlacement               = "InvalidPlacement"
	ReasonNamespaceNotAllowed            = "NamespaceNotAllowed"
	ReasonChartSourceUnsupported         = "ChartSourceUnsupported"
	ReasonContentTooLarge                = "ContentTooLarge"
	ReasonConflict                       = "Conflict"
	ReasonRegistryCredentialsUnavailable = "RegistryCredentialsUnavailable"
	ReasonRegistryCredentialsStale       = "RegistryCredentialsStale"
	ReasonUnauthorized                   = "Unauthorized"
	// ReasonBundleInvalid: the bundle document does not parse or validate (our addition: the
	// source reads bundles from a recipe; the message names the field path).
	ReasonBundleInvalid = "BundleInvalid"
	// ReasonBundleUnavailable: the bundle source cannot be read (our addition).
	ReasonBundleUnavailable = "BundleUnavailable"
	// ReasonBundleNotFound: the registry has no bundle artifact with spec.bundle.oci's
	// repository and digest (our addition; the registry refusing the credentials is
	// Unauthorized, a bundle over the size limit ContentTooLarge).
	ReasonBundleNotFound = "BundleNotFound"
	// ReasonBundleDigestMismatch: what the registry served does not hash to the digest asked
	// for (our addition).
	ReasonBundleDigestMismatch = "BundleDigestMismatch"
)

// EngineAvailable reasons.
const (
	ReasonEngineAvailable = "EngineAvailable"
	ReasonEngineMissing   = "EngineMissing"
	ReasonProjectMissing  = "ProjectMissing"
	// ReasonEngineNotReported is EngineAvailable=Unknown before readiness reported on Argo CD
	// (our addition); no step starts meanwhile.
	ReasonEngineNotReported = "NotReported"
)

// Event reasons.
const (
	// EventFieldOwnershipOverridden: an owned Application was edited and forced back.
	EventFieldOwnershipOverridden = "FieldOwnershipOverridden"
)

// Rollout reasons (RuntimeRolloutSpec.Reason).
const (
	RolloutReasonPlanChanged         = "PlanChanged"
	RolloutReasonEnginePolicyChanged = "EnginePolicyChanged"
	RolloutReasonRuntimeDeleted      = "RuntimeDeleted"
)
