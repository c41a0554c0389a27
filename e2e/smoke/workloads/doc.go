// Package workloads smoke-tests the integration tier's environment with kube-controller-manager,
// kube-scheduler and kwok: workloads become Available without running anything (build tag
// integration).
package workloads
