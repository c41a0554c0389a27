package v1alpha1

// Names users, Argo CD and the chart rely on (docs/argocd.md, docs/install.md): they never change.
const (
	// RuntimeName is the only allowed name of a ClusterRuntime.
	RuntimeName = "cluster"
	// FieldManager is the server-side apply field manager of every operator write, and the
	// username an explicit sync operation is initiated by.
	FieldManager = "aicr-operator"
	// ManagedByValue is the value of LabelManagedBy on every object the operator creates.
	ManagedByValue = "aicr-operator"
	// EnginePolicyArgoCDV2 is the engine policy this operator writes Applications under:
	// comparison exceptions on each Application, never in argocd-cm.
	EnginePolicyArgoCDV2 = "argocd.v2"
	// RuntimeFinalizer is the ClusterRuntime's own cleanup finalizer, added and removed only by
	// the planner.
	RuntimeFinalizer = "operator.aicr.run/cleanup"
	// ArgoResourcesFinalizer makes Argo CD delete an Application's resources before the
	// Application. The operator adds it only during an approved Remove step.
	ArgoResourcesFinalizer = "resources-finalizer.argocd.argoproj.io"
	// ArgoRefreshNormal is the value of AnnotationArgoRefresh the operator sets.
	ArgoRefreshNormal = "normal"
	// PlanRoleValue is the value of LabelRole on plan ConfigMaps.
	PlanRoleValue = "plan"
	// PlanDataKey is the ConfigMap key that holds a plan's canonical JSON.
	PlanDataKey = "plan.json"
	// StepsRoleValue is the value of LabelRole on the ConfigMaps that hold a rollout's steps
	// (RuntimeRolloutStatus.StepRecords).
	StepsRoleValue = "rollout-steps"
	// StepsDataKey is the key of those ConfigMaps that holds the steps, a JSON array.
	StepsDataKey = "steps.json"
	// DefaultNamespace is the operator's namespace when none is given: its plans, bundles,
	// leases and Secrets live there.
	DefaultNamespace = "aicr-system"
	// DefaultEngineNamespace is Argo CD's namespace when none is given (engine.namespace): the
	// Applications, the AppProject and the repository Secrets live there.
	DefaultEngineNamespace = "argocd"
	// DefaultRepoCredsSecret is the repo-creds Secret's name when none is given (the chart's
	// registry.auth.repoCredsSecret, --repo-creds-secret of the planner and the credential
	// refresher): the registry credentials Argo CD, the planner and the refresher share.
	DefaultRepoCredsSecret = "aicr-registry"
)

// Label keys.
const (
	// LabelManagedBy marks objects the operator created (value ManagedByValue).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelRuntime names the ClusterRuntime an Application or rollout belongs to.
	LabelRuntime = "operator.aicr.run/runtime"
	// LabelRole marks operator ConfigMaps by role (PlanRoleValue for plans).
	LabelRole = "operator.aicr.run/role"
	// LabelRollout names the RuntimeRollout a steps ConfigMap belongs to.
	LabelRollout = "operator.aicr.run/rollout"
	// LabelOutcome is set by the planner on a RuntimeRollout once it ends (an Outcome value).
	LabelOutcome = "operator.aicr.run/outcome"
	// LabelArgoSecretType is Argo CD's label for repository credential Secrets.
	LabelArgoSecretType = "argocd.argoproj.io/secret-type"
	// ArgoSecretTypeRepoCreds is LabelArgoSecretType's value for a credential template.
	ArgoSecretTypeRepoCreds = "repo-creds"
)

// Annotation keys.
const (
	// AnnotationRuntimeUID is the UID of the owning ClusterRuntime: with LabelManagedBy, the proof
	// that the operator owns an Application.
	AnnotationRuntimeUID = "operator.aicr.run/runtime-uid"
	// AnnotationPlanDigest is the plan digest an Application was last written from.
	AnnotationPlanDigest = "operator.aicr.run/plan-digest"
	// AnnotationReleaseID is the plan release an Application renders.
	AnnotationReleaseID = "operator.aicr.run/release-id"
	// AnnotationDependsOn lists the releases this one depends on, sorted, comma-separated.
	AnnotationDependsOn = "operator.aicr.run/depends-on"
	// AnnotationDeleteRollout marks an Application being removed by an approved Remove step; its
	// value is the rollout name.
	AnnotationDeleteRollout = "operator.aicr.run/delete-rollout"
	// AnnotationStep identifies the rollout step that last wrote the Application
	// ("<rollout>/<index>"). Readiness judges only observations made after this step began.
	AnnotationStep = "operator.aicr.run/step"
	// AnnotationStepStarted is when that step began (RFC 3339, seconds).
	AnnotationStepStarted = "operator.aicr.run/step-started"
	// AnnotationStepRolloutUID is the UID of the RuntimeRollout whose step last wrote the
	// Application (absent for a repair). A step ID names the rollout by name and its start has
	// one-second precision, so neither tells apart two rollouts of the same name created within
	// a second (a move undone and redone); the UID does, and readiness's verdict carries it.
	AnnotationStepRolloutUID = "operator.aicr.run/step-rollout-uid"
	// AnnotationStepSeq is the ordering token of the command that last wrote the Application
	// (bus.StepRef.Seq: the resourceVersion of the RuntimeRollout the command was decided from;
	// absent when the command carried none). The applier compares it with CompareSeq, never the
	// step's start: planners' clocks may disagree.
	AnnotationStepSeq = "operator.aicr.run/step-seq"
	// AnnotationStepWrite says what the step's write did to the spec: StepWriteChanged or
	// StepWriteUnchanged. With StepWriteUnchanged, readiness waits for the refresh handshake.
	AnnotationStepWrite = "operator.aicr.run/step-write"
	// AnnotationRefreshFor names the step a refresh was requested for. It is set in the same
	// patch as AnnotationArgoRefresh, so "AnnotationRefreshFor == step and no
	// AnnotationArgoRefresh" proves Argo CD compared after the step began.
	AnnotationRefreshFor = "operator.aicr.run/refresh-for"
	// AnnotationEngineSuspended records that the Application was written with automated sync
	// off because the runtime says suspendEngine. It is informational: whether the engine is
	// suspended is the runtime's spec, never this marker.
	AnnotationEngineSuspended = "operator.aicr.run/engine-suspended"
	// AnnotationReadinessGate marks a readiness release ("true"): synced explicitly by the
	// operator in each of its steps.
	AnnotationReadinessGate = "operator.aicr.run/readiness-gate"
	// AnnotationRetryParked on the ClusterRuntime asks the planner to send every parked message
	// back to where it came from (kubectl aicr parked --retry); the planner removes it when
	// done. Its value is anything (the time it was asked, by convention).
	AnnotationRetryParked = "operator.aicr.run/retry-parked"
	// AnnotationArgoRefresh asks Argo CD to compare the Application now; Argo CD removes it.
	AnnotationArgoRefresh = "argocd.argoproj.io/refresh"
)

// Values of AnnotationStepWrite.
const (
	StepWriteChanged   = "changed"
	StepWriteUnchanged = "unchanged"
)

// StepToken is what names one step of one rollout object where the step ID alone may not: the
// value of AnnotationRefreshFor and of the aicr-step info of an explicit sync. It is
// "<stepID>@<rolloutUID>", or the step ID alone for a repair (no rollout UID). Two rollouts of
// the same name have the same step IDs; a refresh or sync one of them asked for proves nothing
// about the other's step.
func StepToken(stepID, rolloutUID string) string {
	if rolloutUID == "" {
		return stepID
	}
	return stepID + "@" + rolloutUID
}

// AnnotatedStepToken is the StepToken of the step that last wrote an Application, from its
// AnnotationStep and AnnotationStepRolloutUID annotations.
func AnnotatedStepToken(annotations map[string]string) string {
	return StepToken(annotations[AnnotationStep], annotations[AnnotationStepRolloutUID])
}
