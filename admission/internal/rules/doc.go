// Package rules holds the admission rules Kubernetes RBAC cannot say: who may write an
// Application that carries Argo CD's resources finalizer, who may set a rollout's approval and
// how, what a ClusterRuntime must be (named cluster, resolvable into a plan), and that plans are
// immutable. Each rule is a pure function of the AdmissionRequest (plus the bundle ConfigMap a
// ClusterRuntime names, and an injected clock), so table tests pin every message.
package rules
