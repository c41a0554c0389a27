// Package kubeaccess declares the Kubernetes API calls each binary makes: the verbs on each
// resource, where, and the call that needs them. The Helm chart's RBAC grants exactly these:
// e2e/deploy TestChartRBACIsTheDeclaredNeeds fails on any grant beyond them and on any need the
// chart misses. The local stack runs the binaries under the chart's RBAC, so a call missing here
// (and so from the chart) fails the e2e tests. Change the code's calls, this declaration and
// deploy/charts/aicr-operator/templates/rbac.yaml together.
package kubeaccess

import v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

// Scope says where a need applies.
type Scope string

// The scopes.
const (
	// Cluster is a cluster-scoped resource (a ClusterRole).
	Cluster Scope = "cluster"
	// Operator is the operator namespace (--namespace, the release namespace).
	Operator Scope = "operator"
	// Engine is Argo CD's namespace (--engine-namespace).
	Engine Scope = "engine"
	// Bundles is each namespace of the chart's bundleNamespaces.
	Bundles Scope = "bundles"
)

// Names the chart's values set.
const (
	// NameEngineProject is the AppProject (engine.project).
	NameEngineProject = "<engine.project>"
	// NameRepoCredsSecret is the repo-creds Secret (registry.auth.repoCredsSecret).
	NameRepoCredsSecret = "<registry.auth.repoCredsSecret>"
	// NameFullname is the release's object name prefix (the chart's fullname): the
	// ValidatingWebhookConfiguration is named so, and the Secrets the setup Job makes start so.
	NameFullname = "<fullname>"
)

// Setup is the chart's setup Job, which has needs but no NATS identity (not a v1alpha1 binary).
const Setup = "setup"

// Need is one permission a binary needs.
type Need struct {
	// Group is the API group ("" for core).
	Group string
	// Resource is the resource, with "/subresource" for a subresource.
	Resource string
	Verbs    []string
	Scope    Scope
	// Names limits the need to these objects (RBAC resourceNames); empty: any.
	Names []string
	// AuthMode, when set, limits the need to that registry.auth mode (aws or static).
	AuthMode string
	// WithoutCertManager limits the need to installs where cert-manager does not issue the
	// certificates (certManager.enabled false).
	WithoutCertManager bool
	// Why names the calls.
	Why string
}

// leader is what leader election on the Lease v1alpha1.LeaseName(binary) needs (servicekit/service
// RunLeader: client-go's LeaseLock gets, creates and updates it).
func leader(binary string) []Need {
	return []Need{
		{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"create"}, Scope: Operator,
			Why: "create the leader Lease the first time (create cannot be limited by name)"},
		{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get", "update"}, Scope: Operator, Names: []string{v1alpha1.LeaseName(binary)},
			Why: "read and renew its own leader Lease"},
	}
}

// Needs returns what binary needs, nil for an unknown one.
func Needs(binary string) []Need {
	switch binary {
	case v1alpha1.BinaryPlanner:
		return append([]Need{
			{Group: "operator.aicr.run", Resource: "clusterruntimes", Verbs: []string{"get", "list", "watch", "update"}, Scope: Cluster,
				Why: "the ClusterRuntime informer; add and remove the cleanup finalizer (the webhook refuses any spec change)"},
			{Group: "operator.aicr.run", Resource: "clusterruntimes/status", Verbs: []string{"update"}, Scope: Cluster,
				Why: "write the runtime's status: it is the only writer"},
			{Group: "operator.aicr.run", Resource: "runtimerollouts", Verbs: []string{"get", "list", "watch", "create", "update", "delete"}, Scope: Cluster,
				Why: "the rollout informer; create, drive and delete rollouts (the webhook refuses any approval the operator writes)"},
			{Group: "operator.aicr.run", Resource: "runtimerollouts/status", Verbs: []string{"update"}, Scope: Cluster,
				Why: "write the rollouts' status"},
			{Group: "", Resource: "configmaps", Verbs: []string{"get", "list", "watch", "create", "delete"}, Scope: Operator,
				Why: "the informer on plans and bundles; store each new plan (plans are immutable); delete a plan nothing refers to any more (spec.rollout.historyLimit), only ConfigMaps labelled as plans and with a UID precondition"},
			{Group: "", Resource: "configmaps", Verbs: []string{"get"}, Scope: Bundles,
				Why: "read a bundle kept outside the operator namespace"},
			{Group: "", Resource: "events", Verbs: []string{"create", "patch"}, Scope: Operator,
				Why: "Events about the ClusterRuntime and its RuntimeRollouts, recorded in the operator namespace (client-go's recorder patches the count of a repeated one)"},
			{Group: "", Resource: "secrets", Verbs: []string{"get"}, Scope: Engine, Names: []string{NameRepoCredsSecret},
				Why: "read the repo-creds Secret at each pull of a spec.bundle.oci bundle: the registry credentials, a refreshed token included"},
			{Group: "argoproj.io", Resource: "applications", Verbs: []string{"list", "watch"}, Scope: Engine,
				Why: "the informer of owned Applications the drift checks read (it never writes one)"},
		}, leader(binary)...)
	case v1alpha1.BinaryApplier:
		return []Need{
			{Group: "argoproj.io", Resource: "applications", Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}, Scope: Engine,
				Why: "the informer of owned Applications and the read before a write; server-side apply (create covers the first one), the refresh and sync merge patches, the Remove step's preconditioned delete"},
			{Group: "", Resource: "configmaps", Verbs: []string{"get"}, Scope: Operator,
				Why: "read a plan by digest"},
			{Group: "operator.aicr.run", Resource: "runtimerollouts", Verbs: []string{"get"}, Scope: Cluster,
				Why: "whether a command's rollout has ended, when the Application's step start ties with the command's (Outdated)"},
		}
	case v1alpha1.BinaryReadiness:
		return append([]Need{
			{Group: "argoproj.io", Resource: "applications", Verbs: []string{"get", "list", "watch"}, Scope: Engine,
				Why: "the informer of owned Applications; get: an owned Application whose Helm values differ from its plan's digest is read whole (the informer keeps the values as a digest)"},
			{Group: "argoproj.io", Resource: "appprojects", Verbs: []string{"get"}, Scope: Engine, Names: []string{NameEngineProject},
				Why: "whether the operator's AppProject exists (ProjectMissing); Argo CD's CRDs are found by discovery, which needs no grant"},
			{Group: "", Resource: "configmaps", Verbs: []string{"get"}, Scope: Operator,
				Why: "read a plan by digest, for drift reports"},
			{Group: "operator.aicr.run", Resource: "runtimerollouts", Verbs: []string{"get"}, Scope: Cluster,
				Why: "check an Application's delete-rollout marker against the rollout it names (a Remove step of the release)"},
		}, leader(binary)...)
	case v1alpha1.BinaryCredRefresher:
		return append([]Need{
			{Group: "", Resource: "secrets", Verbs: []string{"get"}, Scope: Engine, Names: []string{NameRepoCredsSecret},
				Why: "read the repo-creds Secret (static: check it; aws: compare before writing)"},
			{Group: "", Resource: "secrets", Verbs: []string{"update"}, Scope: Engine, Names: []string{NameRepoCredsSecret}, AuthMode: "aws",
				Why: "write a fresh ECR token into the repo-creds Secret the chart created"},
		}, leader(binary)...)
	case v1alpha1.BinaryAdmission:
		return []Need{
			{Group: "", Resource: "configmaps", Verbs: []string{"get"}, Scope: Operator,
				Why: "read the bundle a ClusterRuntime names, to refuse one that does not resolve"},
			{Group: "operator.aicr.run", Resource: "runtimerollouts", Verbs: []string{"get"}, Scope: Cluster,
				Why: "check the delete-rollout marker of an Application the operator writes with the resources finalizer against the rollout it names"},
			{Group: "", Resource: "configmaps", Verbs: []string{"get"}, Scope: Bundles,
				Why: "read a bundle kept outside the operator namespace"},
			{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Verbs: []string{"get", "patch"}, Scope: Cluster,
				Names: []string{NameFullname}, WithoutCertManager: true,
				Why: "write the CA it mounts into its own configuration's caBundle (cainjector does with cert-manager)"},
		}
	case Setup:
		return []Need{
			{Group: "", Resource: "secrets", Verbs: []string{"create"}, Scope: Operator,
				Why: "create the NATS passwords' and the certificates' Secrets once (create cannot be limited by name)"},
			{Group: "", Resource: "secrets", Verbs: []string{"get", "update"}, Scope: Operator, Names: []string{NameFullname + "-nats-auth"},
				Why: "read the passwords' Secret (never changing a password that exists) and add the one a new binary needs"},
			{Group: "", Resource: "secrets", Verbs: []string{"get", "update"}, Scope: Operator,
				Names: []string{NameFullname + "-nats-tls", NameFullname + "-admission-tls"}, WithoutCertManager: true,
				Why: "whether the certificates' Secrets exist (they are never rewritten)"},
		}
	}
	return nil
}
