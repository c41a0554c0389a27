// Package argocd smoke-tests the e2e tier: a real Argo CD v3.4.2 syncs a Helm chart from the
// environment's OCI registry (build tag e2e).
package argocd
