// Package controlplane smoke-tests the integration tier's bare environment: real etcd and
// kube-apiserver with the operator's and Argo CD's CRDs (build tag integration).
package controlplane
