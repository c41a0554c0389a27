// Package e2e holds the repository's cross-service tests. The smoke packages under smoke/ prove
// each test tier's environment (testkit/testenv) works: smoke/controlplane and smoke/workloads
// carry the integration build tag, smoke/argocd the e2e tag. See docs/testing.md.
package e2e
