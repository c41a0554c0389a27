// Package chaos holds the end-to-end fault-injection test: rollouts of a 14-release bundle while
// replicas and leader candidates of every binary, NATS nodes of a three-node cluster, etcd, the
// kube-apiserver and the fake Argo CD controller are killed, paused and partitioned, with audits
// of every stored write, every leader's write, every command and every log (docs/testing.md).
// The test plays Argo CD itself (no Argo CD processes), so rollouts are fast and many. With tag
// chaos it is make chaos's long run; with tag e2e, make test's short one. With -chaos.argocd the
// package runs its variant through real Argo CD instead (make chaos-argocd): slow syncs, charts
// Argo CD cannot render, and Argo CD's controller and repo-server killed too.
package chaos
