// Package stack runs the whole operator on the local stack: a real kube-apiserver, etcd,
// controller-manager, scheduler and kwok, Argo CD v3.4.2, an OCI registry holding the example
// charts, an embedded NATS server, and the five binaries as separate processes with the flags
// the Helm chart passes. The demo (cmd/aicr-demo) and the e2e suite are built on it.
package stack
