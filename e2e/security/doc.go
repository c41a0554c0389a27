// Package security proves the operator's security promises on real servers: each binary's NATS
// identity, as the Helm chart renders it, may publish only its own subjects and still runs its
// real Main under that identity (integration tier: kube-apiserver and an in-process nats-server
// with the chart's configuration).
package security
