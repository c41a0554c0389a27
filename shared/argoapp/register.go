package argoapp

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Group is Argo CD's API group.
const Group = "argoproj.io"

// Resource names of the argoproj.io/v1alpha1 resources this package serves.
const (
	ResourceApplications = "applications"
	ResourceAppProjects  = "appprojects"
)

// SchemeGroupVersion is argoproj.io/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

// ApplicationsResource is the group-resource of Applications (for API errors).
var ApplicationsResource = SchemeGroupVersion.WithResource(ResourceApplications).GroupResource()

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Application{},
		&ApplicationList{},
		&AppProject{},
		&AppProjectList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Scheme holds this package's types and the meta/v1 types the API server answers with (Status,
// WatchEvent, list and patch options).
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := AddToScheme(s); err != nil {
		panic(err) // scheme setup: a programming error
	}
	return s
}()

// Codecs are the serializers of Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)
