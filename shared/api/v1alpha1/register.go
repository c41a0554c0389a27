package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the operator's resources.
const Group = "operator.aicr.run"

// Version is the API version of this package.
const Version = "v1alpha1"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// The kinds of the operator's resources.
const (
	KindClusterRuntime = "ClusterRuntime"
	KindRuntimeRollout = "RuntimeRollout"
)

// ClusterRuntimeResource and RuntimeRolloutResource are the resources for dynamic clients.
var (
	ClusterRuntimeResource = SchemeGroupVersion.WithResource("clusterruntimes")
	RuntimeRolloutResource = SchemeGroupVersion.WithResource("runtimerollouts")
)

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&ClusterRuntime{}, &ClusterRuntimeList{},
		&RuntimeRollout{}, &RuntimeRolloutList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
