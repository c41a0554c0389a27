// Package parked holds the end-to-end test of a message that always fails, on a stack of the
// five binaries with a real kube-apiserver and a real JetStream (nats-server) and no Argo CD:
// its command is redelivered a bounded number of times with backoff, then parked; the runtime
// and kubectl aicr show it with its error (and no secret); a person fixes the cause and sends
// it back with kubectl aicr parked --retry, and it is then processed.
package parked
