package v1alpha1

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletionPolicy says what happens to the stack when the ClusterRuntime is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain leaves every Application and its resources in place (the default).
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete removes every release in reverse dependency order, each Remove
	// needing an approval, before the runtime's finalizer is released.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// ValidationMode switches deployment validation.
// +kubebuilder:validation:Enum=Enabled;Disabled
type ValidationMode string

const (
	// ValidationEnabled judges every release's readiness (the default).
	ValidationEnabled ValidationMode = "Enabled"
	// ValidationDisabled skips deployment validation: a step is done once its write succeeded.
	ValidationDisabled ValidationMode = "Disabled"
)

// ClusterRuntimeSpec is what the platform admin wants on the cluster. The operator never writes it.
type ClusterRuntimeSpec struct {
	// Bundle is where the stack's bundle document comes from.
	Bundle BundleSource `json:"bundle"`

	// Overrides change single values of single components, on top of the bundle's values.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Overrides []Override `json:"overrides,omitempty"`

	// Placement says which nodes system and accelerated components land on.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// Paused stops new steps from starting; a step in flight finishes.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// SuspendEngine writes every owned Application with automated sync off.
	// +optional
	SuspendEngine bool `json:"suspendEngine,omitempty"`

	// DeletionPolicy says what happens to the stack when this runtime is deleted.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Rollout tunes how rollouts proceed.
	// +optional
	Rollout RolloutSettings `json:"rollout,omitempty"`

	// Validation switches deployment validation.
	// +optional
	Validation ValidationSettings `json:"validation,omitempty"`
}

// BundleSource points at the bundle document. Exactly one source is set.
// +kubebuilder:validation:XValidation:rule="has(self.configMap) != has(self.oci)",message="set exactly one bundle source: configMap (the ConfigMap that holds the bundle) or oci (the repository and digest of a bundle pushed with kubectl aicr bundle push)"
type BundleSource struct {
	// ConfigMap holds the bundle YAML under a key.
	// +optional
	ConfigMap *ConfigMapBundleSource `json:"configMap,omitempty"`
	// OCI is a bundle pushed to a registry as an OCI artifact, pinned by its manifest digest.
	// +optional
	OCI *OCIBundleSource `json:"oci,omitempty"`
}

// OCIBundleSource is a bundle artifact in an OCI registry (docs/bundle.md): the planner pulls
// it with the repo-creds Secret's credentials when the repository is under that Secret's url,
// and verifies it against Digest. Changing Digest moves the stack to that bundle.
type OCIBundleSource struct {
	// Repository is the artifact's repository: host[:port]/path, no scheme, tag or digest,
	// such as registry.example.com/aicr/bundles/gpu-stack.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*)*$')",message="must be host[:port]/path with a lowercase path, without oci:// or a tag, such as registry.example.com/aicr/bundles/gpu-stack"
	Repository string `json:"repository"`
	// Digest is the artifact's manifest digest, as kubectl aicr bundle push prints it.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule="self.matches('^sha256:[a-f0-9]{64}$')",message="must be sha256: followed by 64 lowercase hex characters, the manifest digest kubectl aicr bundle push prints"
	Digest string `json:"digest"`
}

// ConfigMapBundleSource is a bundle kept in a ConfigMap.
type ConfigMapBundleSource struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the ConfigMap; the operator namespace when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Key of the bundle YAML in the ConfigMap's data.
	// +optional
	// +kubebuilder:default=bundle.yaml
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// DefaultBundleKey is the key of the bundle YAML in its ConfigMap when the runtime names none
// (the CRD's default for spec.bundle.configMap.key).
const DefaultBundleKey = "bundle.yaml"

// Location returns the namespace and key the bundle is read from: Namespace, or
// operatorNamespace when it is empty, and Key, or DefaultBundleKey when it is empty.
func (s *ConfigMapBundleSource) Location(operatorNamespace string) (namespace, key string) {
	return cmp.Or(s.Namespace, operatorNamespace), cmp.Or(s.Key, DefaultBundleKey)
}

// Override sets one value of one component, at a dotted path into the component's values.
// The path must already exist in the bundle's values for that component (so a typo is an
// error, not a silently ignored key).
type Override struct {
	// Component is the bundle component's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Component string `json:"component"`
	// Path is a dotted path into the component's values, such as "driver.version". A segment
	// that contains a dot is written in brackets: `labels[app.kubernetes.io/name]`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path"`
	// Value replaces the value at Path.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value apiextensionsv1.JSON `json:"value"`
}

// Placement selects nodes for the two classes of components.
type Placement struct {
	// System components: operators, controllers, monitoring.
	// +optional
	System *NodePlacement `json:"system,omitempty"`
	// Accelerated components: what runs on GPU nodes (drivers, device plugins, node agents).
	// +optional
	Accelerated *NodePlacement `json:"accelerated,omitempty"`
}

// NodePlacement is a node selector and tolerations, written into each component's values at
// the paths the bundle declares for it.
type NodePlacement struct {
	// NodeSelector labels the nodes must carry.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations for the nodes' taints.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// RolloutSettings tunes rollouts.
type RolloutSettings struct {
	// ActionTimeout bounds each step; a step past it fails the rollout.
	// +optional
	// +kubebuilder:default="15m"
	ActionTimeout *metav1.Duration `json:"actionTimeout,omitempty"`
	// Deadline bounds a whole rollout; past it the rollout expires. It is also the default
	// expiry of an approval.
	// +optional
	// +kubebuilder:default="6h"
	Deadline *metav1.Duration `json:"deadline,omitempty"`
	// Parallelism is how many independent steps may run at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Parallelism int32 `json:"parallelism,omitempty"`
	// HistoryLimit is how many ended rollouts of the runtime are kept, newest first, with the
	// plan ConfigMaps they name; older ones are deleted by the planner. A rollout in flight, and
	// an ended one that what the stack holds is still read from, is never deleted, whatever the
	// limit; a person may delete older ones (kubectl delete runtimerollout).
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	HistoryLimit int32 `json:"historyLimit,omitempty"`
}

// ValidationSettings switches validation.
type ValidationSettings struct {
	// Deployment judges each release's readiness; Disabled skips it.
	// +optional
	// +kubebuilder:default=Enabled
	Deployment ValidationMode `json:"deployment,omitempty"`
}

// ClusterRuntimeStatus holds observations the planner can rebuild from the spec, plans,
// rollouts and live objects.
type ClusterRuntimeStatus struct {
	// ObservedGeneration is the spec generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Stalled, Resolved, EngineAvailable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ActivePlan is the digest of the plan the stack was last rolled out to.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ActivePlan string `json:"activePlan,omitempty"`
	// DesiredPlan is the digest of the plan the spec resolves to now.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	DesiredPlan string `json:"desiredPlan,omitempty"`
	// Rollout is the name of the rollout in flight, or the last one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Rollout string `json:"rollout,omitempty"`
	// Progress reads like "step 9/18 gpu-operator (Upgrade)".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Progress string `json:"progress,omitempty"`
	// EnginePolicy is the policy the owned Applications were written under.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	EnginePolicy string `json:"enginePolicy,omitempty"`
	// Credentials reports the registry credentials' state.
	// +optional
	Credentials *CredentialsStatus `json:"credentials,omitempty"`
	// Releases holds readiness's latest verdict on each release of the active plan that was
	// judged again after its step: one not ready makes the runtime Ready=False/NotReady until
	// it is ready again. A release ready again stays listed, so a verdict delivered late cannot
	// undo a newer one; a release that leaves the plan is dropped.
	// +optional
	// +listType=map
	// +listMapKey=release
	// +kubebuilder:validation:MaxItems=1024
	Releases []ReleaseHealth `json:"releases,omitempty"`
	// Operator is the build of the planner that last wrote this status: the operator's running
	// release, which kubectl aicr version shows.
	// +optional
	Operator *OperatorBuild `json:"operator,omitempty"`
}

// OperatorBuild is what a binary of the operator was built from (servicekit/buildinfo).
type OperatorBuild struct {
	// Version is the release ("dev" for a build the release tooling did not stamp).
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version"`
	// Revision is the git commit.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Revision string `json:"revision,omitempty"`
}

// ReleaseHealth is readiness's latest verdict on one release after its step.
type ReleaseHealth struct {
	// Release is the plan release (and Application name).
	// +kubebuilder:validation:MaxLength=63
	Release string `json:"release"`
	// Ready is the verdict.
	Ready bool `json:"ready"`
	// Step is the step that last wrote the Application (its operator.aicr.run/step).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Step string `json:"step,omitempty"`
	// ResourceVersion is the Application's resourceVersion the verdict judged.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// ObservedAt is when readiness saw it.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// Since is when it was first judged not ready in this episode (unset while ready).
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Fences are the fences that did not pass, with what readiness saw.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Fences []Fence `json:"fences,omitempty"`
}

// CredentialsStatus reports the repo-creds Secret as the credential refresher last saw it.
type CredentialsStatus struct {
	// Mode is aws or static.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Mode string `json:"mode,omitempty"`
	// RefreshedAt is when the token was last written.
	// +optional
	RefreshedAt *metav1.Time `json:"refreshedAt,omitempty"`
	// ExpiresAt is when the token in the Secret expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Message says what is wrong, if anything.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ClusterRuntime is the GPU software stack the platform admin wants on this cluster. It is a
// singleton named "cluster".
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=aicrrt
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="the ClusterRuntime must be named cluster"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Active Plan",type=string,JSONPath=`.status.activePlan`,priority=1
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterRuntimeSpec   `json:"spec"`
	Status ClusterRuntimeStatus `json:"status,omitempty"`
}

// ClusterRuntimeList is a list of ClusterRuntimes.
//
// +kubebuilder:object:root=true
type ClusterRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterRuntime `json:"items"`
}
