// Package secrets proves on the local stack that no registry password or token, in clear or
// base64, appears in any process log, Kubernetes Event, ClusterRuntime or RuntimeRollout, operator
// Application or plan, or NATS message, across a rollout and a credentials failure and recovery.
package secrets
