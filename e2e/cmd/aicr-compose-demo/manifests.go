package main

import (
	"bytes"
	"fmt"
	"maps"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// WorkloadImage is the image every example chart's pods run in the kind cluster: it sleeps, or
// with the readiness gate's --checks argument exits 0 at once (deploy/compose/demo-workload.Dockerfile).
// The examples' own images (registry.invalid) never pull.
const (
	WorkloadImage = "aicr-operator/demo-workload"
	WorkloadTag   = "dev"
)

// Config is what the walk-through sets up.
type Config struct {
	// Cluster is the kind cluster's name; its API server answers inside kind's Docker network as
	// <Cluster>-control-plane.
	Cluster string
	// RegistryName is the registry container's name: Argo CD (in kind) reaches it as
	// <RegistryName>:5000 on the "kind" network.
	RegistryName string
	// RegistryPort is where the host reaches the registry (127.0.0.1), to push.
	RegistryPort int
	// RegistryUser and RegistryPassword guard the registry (htpasswd), as the local stack's.
	RegistryUser, RegistryPassword string
}

// Repository is registry.repository: charts/ and wrappers/ under it, as Argo CD names them.
func (c Config) Repository() string { return c.RegistryName + ":5000/" + stack.RepositoryPath }

// PushHost is where the host pushes the charts.
func (c Config) PushHost() string { return fmt.Sprintf("127.0.0.1:%d", c.RegistryPort) }

// Components are the example GPU stack's, with their pods on the demo workload image.
func Components() []stack.ExampleComponent {
	cs := stack.ExampleComponents()
	for i := range cs {
		v := maps.Clone(cs[i].Values)
		v["image"] = map[string]any{"repository": WorkloadImage, "tag": WorkloadTag}
		cs[i].Values = v
	}
	return cs
}

// Bundle is the example bundle with the digests the registry reported for each pushed chart.
func Bundle(digests map[string]string) ([]byte, error) {
	return stack.BundleYAML("gpu-stack", "1.0.0", Components(), digests)
}

// RuntimeSpec is the no-Docker demo's: the bundle ConfigMap, the accelerated components on the
// node labelled as a GPU node.
func RuntimeSpec() v1alpha1.ClusterRuntimeSpec {
	spec := stack.DefaultRuntimeSpec()
	spec.Placement = &v1alpha1.Placement{Accelerated: &v1alpha1.NodePlacement{NodeSelector: map[string]string{stack.GPUNodeLabel: "true"}}}
	return spec
}

// Htpasswd is the registry's htpasswd line (bcrypt, the only hash it accepts).
func Htpasswd(user, password string) ([]byte, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("hash the registry password: %w", err)
	}
	return []byte(user + ":" + string(h) + "\n"), nil
}

// secret is an Argo CD repository Secret of type oci over plain HTTP.
func (c Config) secret(name, secretType, url string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stack.EngineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: secretType}},
		StringData: map[string]string{"type": "oci", "url": url, "insecureOCIForceHttp": "true",
			"username": c.RegistryUser, "password": c.RegistryPassword},
	}
}

// Manifests are what the walk-through applies once the charts are pushed, as the local stack
// creates them: the repo-creds Secret the operator checks and Argo CD pulls with (static), a
// repository Secret per chart (Argo CD v3.4.2 honours plain HTTP per repository), and the bundle
// ConfigMap with the pushed digests.
func (c Config) Manifests(digests map[string]string) ([]byte, error) {
	bundle, err := Bundle(digests)
	if err != nil {
		return nil, err
	}
	objs := []any{c.secret(stack.RepoCredsSecret, v1alpha1.ArgoSecretTypeRepoCreds, "oci://"+c.Repository())}
	for _, comp := range Components() {
		objs = append(objs, c.secret("aicr-repo-"+comp.Name, "repository", "oci://"+c.Repository()+"/"+comp.Dir+"/"+comp.Name))
	}
	objs = append(objs, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: stack.BundleConfigMap, Namespace: stack.OperatorNamespace},
		Data:       map[string]string{v1alpha1.DefaultBundleKey: string(bundle)},
	})
	return join(objs)
}

// Runtime is the ClusterRuntime the walk-through applies last.
func Runtime() ([]byte, error) {
	return join([]any{&v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName},
		Spec:       RuntimeSpec(),
	}})
}

func join(objs []any) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objs {
		raw, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(bytes.ReplaceAll(raw, []byte("\n  creationTimestamp: null"), nil))
	}
	return b.Bytes(), nil
}
