// Package argoapp is the operator's own, small copy of the Argo CD Application API
// (argoproj.io/v1alpha1): the Application fields the applier writes and readiness reads, under
// the same Go type and field names and JSON names as Argo CD v3.4.2's
// github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1, plus a typed REST client.
//
// Why: Argo CD's API package pulls kubectl, Helm, gitops-engine and Kubernetes' internal API
// packages into every binary that imports it (binaries over twice the size, and more idle
// memory: docs/performance.md), and decoding its full Application keeps status.resources and
// status.history of every watched Application in memory. This package imports no
// github.com/argoproj module. The contract test (e2e/contract/argoapp_test.go) decodes recorded Argo CD objects and fully populated
// upstream objects through these types and proves every field here survives into Argo CD's
// type unchanged, so the subset cannot drift from upstream by a typo.
//
// What is kept: the whole spec (fields the operator never reads are kept opaque, as raw JSON,
// so drift detection still sees someone else's spec.source.kustomize or spec.info); of the
// status only sync, health, conditions, reconciledAt and operationState (what readiness's
// fences read); the top-level operation.
//
// Correctness rule: decoding into these types DROPS every field they do not declare (most of
// status, and anything newer than v3.4.2). So an Application read through this package must
// never be written back whole: no Update (PUT) and no Create of an object that was read.
// Writes go through server-side apply of a manifest the operator builds (it owns exactly the
// fields it sends) and JSON merge patches of named fields; the client's only writes are Patch
// and Delete, on purpose. Readiness never writes Applications.
//
// +kubebuilder:object:generate=true
// +groupName=argoproj.io
package argoapp
