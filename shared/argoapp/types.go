package argoapp

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Application is an Argo CD Application: the whole spec, the top-level operation, and the part
// of the status readiness judges. Reading one drops every other field, so it is never written
// back whole (see the package documentation).
//
// +kubebuilder:object:root=true
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ApplicationSpec   `json:"spec"`
	Status            ApplicationStatus `json:"status,omitempty"`
	// Operation is the operation Argo CD is asked to run (an explicit sync).
	Operation *Operation `json:"operation,omitempty"`
}

// ApplicationList is a list of Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Application `json:"items"`
}

// AppProject is an Argo CD AppProject, as far as readiness needs one: it only checks that the
// operator's project exists, so only the metadata is decoded.
//
// +kubebuilder:object:root=true
type AppProject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
}

// AppProjectList is a list of AppProjects.
//
// +kubebuilder:object:root=true
type AppProjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []AppProject `json:"items"`
}

// ApplicationSpec is the desired state of an Application: every field of Argo CD v3.4.2's, so
// drift detection compares the whole spec. Fields the operator never sets or reads are opaque
// JSON.
type ApplicationSpec struct {
	// Source is the chart the Application deploys (the operator writes exactly one).
	Source *ApplicationSource `json:"source,omitempty"`
	// Destination is the target cluster and namespace.
	Destination ApplicationDestination `json:"destination"`
	// Project is the AppProject.
	Project string `json:"project"`
	// SyncPolicy controls automated sync, its options and retries.
	SyncPolicy *SyncPolicy `json:"syncPolicy,omitempty"`
	// IgnoreDifferences are the comparison exceptions.
	IgnoreDifferences IgnoreDifferences `json:"ignoreDifferences,omitempty"`
	// Info is informational name/value pairs.
	Info []Info `json:"info,omitempty"`
	// RevisionHistoryLimit bounds status.history.
	RevisionHistoryLimit *int64 `json:"revisionHistoryLimit,omitempty"`
	// Sources is a multi-source Application's sources (the operator never writes it; readiness
	// refuses to judge an Application that has them).
	Sources ApplicationSources `json:"sources,omitempty"`
	// SourceHydrator is kept opaque: the operator never uses it.
	SourceHydrator *runtime.RawExtension `json:"sourceHydrator,omitempty"`
}

// IgnoreDifferences lists resources and fields Argo CD ignores when comparing.
type IgnoreDifferences []ResourceIgnoreDifferences

// ResourceIgnoreDifferences is one comparison exception.
type ResourceIgnoreDifferences struct {
	Group                 string   `json:"group,omitempty"`
	Kind                  string   `json:"kind"`
	Name                  string   `json:"name,omitempty"`
	Namespace             string   `json:"namespace,omitempty"`
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

// Info is a name/value pair (spec.info, and an operation's info).
type Info struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ApplicationSources is a list of sources.
type ApplicationSources []ApplicationSource

// ApplicationSource is where the manifests come from. The kustomize, directory and plugin
// sources are kept opaque: the operator writes Helm sources only.
type ApplicationSource struct {
	RepoURL        string                 `json:"repoURL"`
	Path           string                 `json:"path,omitempty"`
	TargetRevision string                 `json:"targetRevision,omitempty"`
	Helm           *ApplicationSourceHelm `json:"helm,omitempty"`
	Kustomize      *runtime.RawExtension  `json:"kustomize,omitempty"`
	Directory      *runtime.RawExtension  `json:"directory,omitempty"`
	Plugin         *runtime.RawExtension  `json:"plugin,omitempty"`
	Chart          string                 `json:"chart,omitempty"`
	Ref            string                 `json:"ref,omitempty"`
	Name           string                 `json:"name,omitempty"`
}

// ApplicationSourceHelm is a Helm source's options.
type ApplicationSourceHelm struct {
	ValueFiles              []string              `json:"valueFiles,omitempty"`
	Parameters              []HelmParameter       `json:"parameters,omitempty"`
	ReleaseName             string                `json:"releaseName,omitempty"`
	Values                  string                `json:"values,omitempty"`
	FileParameters          []HelmFileParameter   `json:"fileParameters,omitempty"`
	Version                 string                `json:"version,omitempty"`
	PassCredentials         bool                  `json:"passCredentials,omitempty"`
	IgnoreMissingValueFiles bool                  `json:"ignoreMissingValueFiles,omitempty"`
	SkipCrds                bool                  `json:"skipCrds,omitempty"`
	ValuesObject            *runtime.RawExtension `json:"valuesObject,omitempty"`
	Namespace               string                `json:"namespace,omitempty"`
	KubeVersion             string                `json:"kubeVersion,omitempty"`
	APIVersions             []string              `json:"apiVersions,omitempty"`
	SkipTests               bool                  `json:"skipTests,omitempty"`
	SkipSchemaValidation    bool                  `json:"skipSchemaValidation,omitempty"`
}

// HelmParameter is a Helm --set parameter.
type HelmParameter struct {
	Name        string `json:"name,omitempty"`
	Value       string `json:"value,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

// HelmFileParameter is a Helm --set-file parameter.
type HelmFileParameter struct {
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"`
}

// ApplicationDestination is the target cluster and namespace.
type ApplicationDestination struct {
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// SyncPolicy controls when and how a sync runs.
type SyncPolicy struct {
	Automated   *SyncPolicyAutomated `json:"automated,omitempty"`
	SyncOptions SyncOptions          `json:"syncOptions,omitempty"`
	Retry       *RetryStrategy       `json:"retry,omitempty"`
	// ManagedNamespaceMetadata is kept opaque: the operator never uses it.
	ManagedNamespaceMetadata *runtime.RawExtension `json:"managedNamespaceMetadata,omitempty"`
}

// SyncOptions are sync options ("ServerSideApply=true").
type SyncOptions []string

// SyncPolicyAutomated is the automated sync policy.
type SyncPolicyAutomated struct {
	Prune      *bool `json:"prune,omitempty"`
	SelfHeal   *bool `json:"selfHeal,omitempty"`
	AllowEmpty *bool `json:"allowEmpty,omitempty"`
	Enabled    *bool `json:"enabled,omitempty"`
}

// RetryStrategy is how a failed sync is retried.
type RetryStrategy struct {
	Limit   int64    `json:"limit,omitempty"`
	Backoff *Backoff `json:"backoff,omitempty"`
	Refresh bool     `json:"refresh,omitempty"`
}

// Backoff is the retry backoff.
type Backoff struct {
	Duration    string `json:"duration,omitempty"`
	Factor      *int64 `json:"factor,omitempty"`
	MaxDuration string `json:"maxDuration,omitempty"`
}

// Operation is an operation Argo CD is asked to run.
type Operation struct {
	Sync        *SyncOperation     `json:"sync,omitempty"`
	InitiatedBy OperationInitiator `json:"initiatedBy,omitempty"`
	Info        []*Info            `json:"info,omitempty"`
	Retry       RetryStrategy      `json:"retry,omitempty"`
}

// SyncOperation is a sync request: what the operator writes for a readiness release and what
// readiness reads of a finished operation.
type SyncOperation struct {
	Revision     string             `json:"revision,omitempty"`
	Prune        bool               `json:"prune,omitempty"`
	SyncStrategy *SyncStrategy      `json:"syncStrategy,omitempty"`
	Source       *ApplicationSource `json:"source,omitempty"`
	SyncOptions  SyncOptions        `json:"syncOptions,omitempty"`
}

// OperationInitiator is who started an operation.
type OperationInitiator struct {
	Username  string `json:"username,omitempty"`
	Automated bool   `json:"automated,omitempty"`
}

// SyncStrategy is apply or hook.
type SyncStrategy struct {
	Apply *SyncStrategyApply `json:"apply,omitempty"`
	Hook  *SyncStrategyHook  `json:"hook,omitempty"`
}

// SyncStrategyApply syncs with kubectl apply.
type SyncStrategyApply struct {
	Force bool `json:"force,omitempty"`
}

// SyncStrategyHook syncs with hooks.
type SyncStrategyHook struct {
	SyncStrategyApply `json:",inline"`
}

// ApplicationStatus is the part of Argo CD's status readiness judges. status.resources,
// history, summary, sourceHydrator and the rest are not decoded.
type ApplicationStatus struct {
	Sync           SyncStatus             `json:"sync,omitempty"`
	Health         AppHealthStatus        `json:"health,omitempty"`
	Conditions     []ApplicationCondition `json:"conditions,omitempty"`
	ReconciledAt   *metav1.Time           `json:"reconciledAt,omitempty"`
	OperationState *OperationState        `json:"operationState,omitempty"`
}

// SyncStatusCode is a sync status.
type SyncStatusCode string

// Sync status codes.
const (
	SyncStatusCodeUnknown   SyncStatusCode = "Unknown"
	SyncStatusCodeSynced    SyncStatusCode = "Synced"
	SyncStatusCodeOutOfSync SyncStatusCode = "OutOfSync"
)

// SyncStatus is the comparison of the spec with the cluster.
type SyncStatus struct {
	Status     SyncStatusCode `json:"status"`
	ComparedTo ComparedTo     `json:"comparedTo,omitempty"`
	Revision   string         `json:"revision,omitempty"`
}

// ComparedTo is the spec the last comparison used (comparedTo.sources is not decoded).
// IgnoreDifferences is what Argo CD compared with: a write that changes only the comparison
// exceptions is proven compared once it shows the new ones.
type ComparedTo struct {
	Source            ApplicationSource      `json:"source,omitempty"`
	Destination       ApplicationDestination `json:"destination"`
	IgnoreDifferences IgnoreDifferences      `json:"ignoreDifferences,omitempty"`
}

// HealthStatusCode is a health status.
type HealthStatusCode string

// Health status codes, as gitops-engine names them.
const (
	HealthStatusUnknown     HealthStatusCode = "Unknown"
	HealthStatusProgressing HealthStatusCode = "Progressing"
	HealthStatusHealthy     HealthStatusCode = "Healthy"
	HealthStatusSuspended   HealthStatusCode = "Suspended"
	HealthStatusDegraded    HealthStatusCode = "Degraded"
	HealthStatusMissing     HealthStatusCode = "Missing"
)

// AppHealthStatus is the Application's health (the deprecated message is not decoded).
type AppHealthStatus struct {
	Status             HealthStatusCode `json:"status,omitempty"`
	LastTransitionTime *metav1.Time     `json:"lastTransitionTime,omitempty"`
}

// ApplicationConditionType is a condition type.
type ApplicationConditionType = string

// Condition types readiness treats as errors.
const (
	ApplicationConditionInvalidSpecError = "InvalidSpecError"
	ApplicationConditionComparisonError  = "ComparisonError"
	ApplicationConditionSyncError        = "SyncError"
)

// ApplicationCondition is a condition (its lastTransitionTime is not decoded).
type ApplicationCondition struct {
	Type    ApplicationConditionType `json:"type"`
	Message string                   `json:"message"`
}

// OperationPhase is the phase of an operation.
type OperationPhase string

// Operation phases, as gitops-engine names them.
const (
	OperationRunning     OperationPhase = "Running"
	OperationTerminating OperationPhase = "Terminating"
	OperationFailed      OperationPhase = "Failed"
	OperationError       OperationPhase = "Error"
	OperationSucceeded   OperationPhase = "Succeeded"
)

// Completed reports whether the phase is final.
func (p OperationPhase) Completed() bool {
	switch p {
	case OperationFailed, OperationError, OperationSucceeded:
		return true
	}
	return false
}

// OperationState is the state of the current or last operation (its retryCount is not
// decoded).
type OperationState struct {
	Operation  Operation            `json:"operation"`
	Phase      OperationPhase       `json:"phase"`
	Message    string               `json:"message,omitempty"`
	SyncResult *SyncOperationResult `json:"syncResult,omitempty"`
	StartedAt  metav1.Time          `json:"startedAt"`
	FinishedAt *metav1.Time         `json:"finishedAt,omitempty"`
}

// SyncOperationResult is what a sync applied (its per-resource results are not decoded).
type SyncOperationResult struct {
	Revision string            `json:"revision"`
	Source   ApplicationSource `json:"source,omitempty"`
}
