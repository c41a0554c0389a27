// Package benchargocd measures what users feel on a real Argo CD v3.4.2 (make bench-argocd):
// on the local stack of package stack (kube-apiserver, etcd, kwok, Argo CD's application
// controller and repo-server, a registry), an 8-release chain and the example DAG rolled out by
// the operator, against the event-driven floor on the same Argo CD in the same run: a loop that
// creates each Application, in the shape the operator writes, the moment the Applications it
// depends on are ready. It reports total time, the gap from an Application ready to the next
// one's sync running, and syncs per Application, for both, and their ratio.
//
// The benchmark files carry the build tag benchargocd, so only make bench-argocd runs them;
// the floor's readiness predicate (floor.go) and its test are in every tier.
package benchargocd
