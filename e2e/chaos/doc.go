// Package chaos holds the end-to-end fault-injection test: rollouts of a 12-release bundle while
// a random binary, the NATS server or the kube-apiserver is SIGKILLed and started again. The test
// plays Argo CD itself (no Argo CD processes), so rollouts are fast and many.
package chaos
