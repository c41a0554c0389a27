// Package v1alpha1 holds the operator's API: the ClusterRuntime and RuntimeRollout resources of the
// group operator.aicr.run, their conditions and reasons, and every label and annotation key the
// operator reads or writes. It is the contract between the planner, the applier, readiness,
// admission and the kubectl plugin: change it additively.
//
// +kubebuilder:object:generate=true
// +groupName=operator.aicr.run
package v1alpha1
