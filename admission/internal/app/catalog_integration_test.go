//go:build integration

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/admission/internal/webhook"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// The layers of the API server that refuse a ClusterRuntime, in the order they run: the CRD's
// OpenAPI schema and CEL rules (shared/api/crds), then the validating webhook (this binary).
const (
	layerCRD     = "crd"
	layerWebhook = "webhook"
)

// runtimeWebhookDenied is how the API server prefixes the runtime webhook's status message.
const runtimeWebhookDenied = `admission webhook "runtime.admission.aicr.run" denied the request: `

// catalogNamespace holds the catalog's bundle ConfigMaps (the webhook's --namespace).
const catalogNamespace = "aicr-system"

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// catalogBundle is valid: the ClusterRuntime cases that are not about the bundle name it.
const catalogBundle = `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: gpu-stack, version: 1.2.0}
components:
  - name: cert-manager
    chart: {path: charts/cert-manager, digest: ` + digestA + `}
    namespace: cert-manager
    values: {replicas: 1, tolerations: [{key: a, operator: Exists}]}
  - name: gpu-operator
    chart: {path: charts/gpu-operator, digest: ` + digestB + `}
    namespace: gpu-operator
    dependsOn: [cert-manager]
    values: {driver: {version: "580.65.06"}}
    placement: {class: accelerated, nodeSelectorPaths: [nodeSelector], tolerationsPaths: [tolerations]}
`

// bundleOf is a bundle document with the given components block (YAML list items).
func bundleOf(components string) string {
	return "apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: gpu-stack, version: 1.2.0}\ncomponents:\n" + components
}

// component is one list item of a bundle's components, valid unless extra says otherwise.
func component(name, namespace, extra string) string {
	return fmt.Sprintf("  - {name: %s, namespace: %s, chart: {path: charts/%s, digest: %s}%s}\n", name, namespace, name, digestA, extra)
}

// catalogCase is one invalid input and how the API server must refuse it.
type catalogCase struct {
	// bundle, when set, is stored in a ConfigMap of its own that the runtime names; otherwise the
	// runtime names the valid catalogBundle.
	bundle string
	// spec is merged over {bundle: {configMap: {name: <the case's ConfigMap>}}}.
	spec map[string]any
	// name is metadata.name; "cluster" when empty.
	name string
	// finalizers are set on the created object.
	finalizers []any
	// asOperator writes as the applier's service account instead of the admin.
	asOperator bool
	// layer is the layer that must refuse it: layerCRD or layerWebhook.
	layer string
	// field is the exact field path of the one cause in the API server's status.
	field string
	// accepted must appear in the cause's message: it names what is accepted (and, for a bundle,
	// the bundle path at fault).
	accepted string
}

// TestInvalidRuntimeCatalog is the catalog of bad ClusterRuntimes and bundles: each is sent by
// a client to a real kube-apiserver, which refuses it in the layer named (the CRD schema or the
// webhook binary's real Run, called by the API server over TLS with the shipped configuration),
// with one cause naming the exact field path and a message saying what is accepted. Nothing is
// stored.
func TestInvalidRuntimeCatalog(t *testing.T) {
	env := testenv.Current(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"argocd", catalogNamespace, "bundles"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// RBAC lets the applier's service account write ClusterRuntimes: only admission stops it.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog-runtime-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: []string{"clusterruntimes"},
			Verbs: []string{"get", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog-runtime-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "catalog-runtime-writer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "aicr-system", Name: "aicr-operator-applier"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(catalogNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "catalog-good"}, Data: map[string]string{"bundle.yaml": catalogBundle},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startWebhook(t, env)

	longPath := strings.Repeat("a", 513)
	cases := map[string]catalogCase{
		// Overrides.
		"an override of a component the bundle does not have": {
			spec:  map[string]any{"overrides": []any{override("nvidia-driver", "version", `"1"`)}},
			layer: layerWebhook, field: "spec.overrides[0].component",
			accepted: `no component "nvidia-driver" in bundle gpu-stack 1.2.0 (components: cert-manager, gpu-operator)`,
		},
		"an override of a key the component's values do not declare": {
			spec:  map[string]any{"overrides": []any{override("gpu-operator", "driver.versoin", `"590.1"`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `driver has no key "versoin" (keys: version); an override may only change a value the bundle declares`,
		},
		"an override path with an empty key": {
			spec:  map[string]any{"overrides": []any{override("gpu-operator", "driver..version", `"1"`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `a dotted path such as driver.version; keys with dots go in brackets (labels[app.kubernetes.io/name]) and list items by index (containers[0])`,
		},
		"an override path with an unclosed bracket": {
			spec:  map[string]any{"overrides": []any{override("cert-manager", "tolerations[0", `{}`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `"tolerations[0" has an unclosed '[': a dotted path such as driver.version`,
		},
		"an override path ending with a dot": {
			spec:  map[string]any{"overrides": []any{override("gpu-operator", "driver.", `"1"`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `"driver." ends with '.': a dotted path such as driver.version`,
		},
		"an override of a list item out of range": {
			spec:  map[string]any{"overrides": []any{override("cert-manager", "tolerations[3].key", `"b"`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `has 1 items; index 3 is out of range; an override may only change a value the bundle declares`,
		},
		"an override addressing a list by key": {
			spec:  map[string]any{"overrides": []any{override("cert-manager", "tolerations.key", `"b"`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `is a list; address its items by index, such as [0]`,
		},
		"an override addressing into a string": {
			spec:  map[string]any{"overrides": []any{override("gpu-operator", "driver.version.major", `1`)}},
			layer: layerWebhook, field: "spec.overrides[0].path",
			accepted: `an override may only change a value the bundle declares`,
		},
		"two overrides of the same value": {
			spec: map[string]any{"overrides": []any{
				override("gpu-operator", "driver.version", `"1"`), override("gpu-operator", "driver.version", `"2"`)}},
			layer: layerWebhook, field: "spec.overrides[1].path",
			accepted: `gpu-operator driver.version is already overridden by spec.overrides[0]; keep one`,
		},
		"an override without a value": {
			spec:  map[string]any{"overrides": []any{map[string]any{"component": "gpu-operator", "path": "driver.version"}}},
			layer: layerCRD, field: "spec.overrides[0].value",
			accepted: `Required value`,
		},
		"an override without a component": {
			spec:  map[string]any{"overrides": []any{override("", "driver.version", `"1"`)}},
			layer: layerCRD, field: "spec.overrides[0].component",
			accepted: `should be at least 1 chars long`,
		},
		"an override path over 512 characters": {
			spec:  map[string]any{"overrides": []any{override("gpu-operator", longPath, `"1"`)}},
			layer: layerCRD, field: "spec.overrides[0].path",
			accepted: `may not be more than 512 bytes`,
		},

		// Placement.
		"a node selector label key that is not a qualified name": {
			spec:  map[string]any{"placement": map[string]any{"accelerated": map[string]any{"nodeSelector": map[string]any{"nvidia.com/gpu present": "true"}}}},
			layer: layerWebhook, field: "spec.placement.accelerated.nodeSelector[nvidia.com/gpu present]",
			accepted: `"nvidia.com/gpu present" is not a valid label key: name part must consist of alphanumeric characters`,
		},
		"a node selector label value that is not a label value": {
			spec:  map[string]any{"placement": map[string]any{"system": map[string]any{"nodeSelector": map[string]any{"node-role": "system pool"}}}},
			layer: layerWebhook, field: "spec.placement.system.nodeSelector[node-role]",
			accepted: `"system pool" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters`,
		},
		"a toleration with an unknown operator": {
			spec:  map[string]any{"placement": map[string]any{"system": map[string]any{"tolerations": []any{map[string]any{"key": "a", "operator": "In"}}}}},
			layer: layerWebhook, field: "spec.placement.system.tolerations[0].operator",
			accepted: `"In" is not a toleration operator; use Equal or Exists`,
		},
		"a toleration Equal without a key": {
			spec:  map[string]any{"placement": map[string]any{"accelerated": map[string]any{"tolerations": []any{map[string]any{"operator": "Equal", "value": "x"}}}}},
			layer: layerWebhook, field: "spec.placement.accelerated.tolerations[0].operator",
			accepted: `operator Equal needs a key; use operator Exists to tolerate every taint`,
		},
		"a toleration Exists with a value": {
			spec:  map[string]any{"placement": map[string]any{"accelerated": map[string]any{"tolerations": []any{map[string]any{"key": "gpu", "operator": "Exists", "value": "x"}}}}},
			layer: layerWebhook, field: "spec.placement.accelerated.tolerations[0].value",
			accepted: `operator Exists takes no value; remove it or use operator Equal`,
		},
		"a toleration key that is not a qualified name": {
			spec:  map[string]any{"placement": map[string]any{"system": map[string]any{"tolerations": []any{map[string]any{"key": "bad key", "operator": "Exists"}}}}},
			layer: layerWebhook, field: "spec.placement.system.tolerations[0].key",
			accepted: `"bad key" is not a valid taint key`,
		},
		"a toleration with an unknown effect": {
			spec:  map[string]any{"placement": map[string]any{"system": map[string]any{"tolerations": []any{map[string]any{"key": "a", "operator": "Exists", "effect": "NoRun"}}}}},
			layer: layerWebhook, field: "spec.placement.system.tolerations[0].effect",
			accepted: `"NoRun" is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute`,
		},
		"tolerationSeconds without effect NoExecute": {
			spec:  map[string]any{"placement": map[string]any{"system": map[string]any{"tolerations": []any{map[string]any{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": int64(30)}}}}},
			layer: layerWebhook, field: "spec.placement.system.tolerations[0].tolerationSeconds",
			accepted: `tolerationSeconds applies only to effect NoExecute`,
		},

		// The bundle source.
		"no bundle source": {
			spec:  map[string]any{"bundle": map[string]any{}},
			layer: layerCRD, field: "spec.bundle",
			accepted: `set exactly one bundle source: configMap (the ConfigMap that holds the bundle) or oci (the repository and digest of a bundle pushed with kubectl aicr bundle push)`,
		},
		"two bundle sources": {
			spec: map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": "catalog-good"},
				"oci": map[string]any{"repository": "registry.example.com/aicr/bundles", "digest": digestA}}},
			layer: layerCRD, field: "spec.bundle",
			accepted: `set exactly one bundle source`,
		},
		"an OCI bundle digest that is a tag": {
			spec:  map[string]any{"bundle": map[string]any{"oci": map[string]any{"repository": "registry.example.com/aicr/bundles", "digest": "v1.2.0"}}},
			layer: layerCRD, field: "spec.bundle.oci.digest",
			accepted: `must be sha256: followed by 64 lowercase hex characters, the manifest digest kubectl aicr bundle push prints`,
		},
		"an OCI bundle repository with a scheme": {
			spec:  map[string]any{"bundle": map[string]any{"oci": map[string]any{"repository": "oci://registry.example.com/aicr/bundles", "digest": digestA}}},
			layer: layerCRD, field: "spec.bundle.oci.repository",
			accepted: `must be host[:port]/path with a lowercase path, without oci:// or a tag, such as registry.example.com/aicr/bundles/gpu-stack`,
		},
		"an OCI bundle repository with a tag": {
			spec:  map[string]any{"bundle": map[string]any{"oci": map[string]any{"repository": "registry.example.com/aicr/bundles:v1", "digest": digestA}}},
			layer: layerCRD, field: "spec.bundle.oci.repository",
			accepted: `must be host[:port]/path`,
		},
		"an OCI bundle without a digest": {
			spec:  map[string]any{"bundle": map[string]any{"oci": map[string]any{"repository": "registry.example.com/aicr/bundles"}}},
			layer: layerCRD, field: "spec.bundle.oci.digest",
			accepted: `Required value`,
		},
		"a bundle ConfigMap that does not exist": {
			spec:  map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": "no-such-bundle"}}},
			layer: layerWebhook, field: "spec.bundle.configMap.name",
			accepted: `ConfigMap aicr-system/no-such-bundle not found: create it with the bundle under key "bundle.yaml", or name an existing ConfigMap`,
		},
		"a bundle ConfigMap in another namespace that does not exist": {
			spec:  map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": "catalog-good", "namespace": "bundles"}}},
			layer: layerWebhook, field: "spec.bundle.configMap.name",
			accepted: `ConfigMap bundles/catalog-good not found: create it with the bundle under key "bundle.yaml"`,
		},
		"a bundle key the ConfigMap does not have": {
			spec:  map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": "catalog-good", "key": "bundle.yml"}}},
			layer: layerWebhook, field: "spec.bundle.configMap.key",
			accepted: `ConfigMap aicr-system/catalog-good has no key "bundle.yml" (its keys: bundle.yaml); set spec.bundle.configMap.key to the key that holds the bundle`,
		},
		"an empty bundle ConfigMap name": {
			spec:  map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": ""}}},
			layer: layerCRD, field: "spec.bundle.configMap.name",
			accepted: `should be at least 1 chars long`,
		},

		// The bundle itself: refused at spec.bundle.configMap, the message naming the bundle path.
		"a bundle that is not YAML": {
			bundle: "components: [\n  - {name: a\n",
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `does not resolve: bundle does not parse: `,
		},
		"an empty bundle": {
			bundle: "\n",
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `bundle is empty; expected a document with apiVersion bundle.aicr.run/v1alpha1, kind Bundle and components`,
		},
		"a bundle of another apiVersion": {
			bundle: strings.Replace(catalogBundle, "bundle.aicr.run/v1alpha1", "bundle.aicr.run/v2", 1),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `apiVersion: "bundle.aicr.run/v2" is not supported; use "bundle.aicr.run/v1alpha1"`,
		},
		"a bundle with an unknown field": {
			bundle: bundleOf(component("nfd", "nfd", ", chrt: {}")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].chrt: unknown field "chrt"; accepted here: chart, dependsOn, name, namespace, placement, readinessGate, values`,
		},
		"a bundle without components": {
			bundle: bundleOf("  []\n"),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components: at least one component is required`,
		},
		"a component name that is not a DNS-1123 label": {
			bundle: bundleOf(component("NFD", "nfd", "")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].name: "NFD" is not a valid name: a lowercase DNS-1123 label of at most`,
		},
		"two components of the same name": {
			bundle: bundleOf(component("nfd", "nfd", "") + component("nfd", "nfd2", "")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].name: duplicate component "nfd" (first at components[0]); names must be unique`,
		},
		"a dependency on a component the bundle does not have": {
			bundle: bundleOf(component("nfd", "nfd", "") + component("gpu-operator", "gpu-operator", ", dependsOn: [cert-manager]")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].dependsOn[0]: unknown component "cert-manager"; dependsOn names components of this bundle (gpu-operator, nfd)`,
		},
		"a component that depends on itself": {
			bundle: bundleOf(component("nfd", "nfd", ", dependsOn: [nfd]")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].dependsOn[0]: "nfd" depends on itself; name other components`,
		},
		"a dependency cycle": {
			bundle: bundleOf(component("a", "a", ", dependsOn: [b]") + component("b", "b", ", dependsOn: [a]")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `dependency cycle a -> b -> a; dependencies must form a directed acyclic graph`,
		},
		"a chart digest that is a tag": {
			bundle: strings.Replace(catalogBundle, digestB, "v25.3.0", 1),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].chart.digest: "v25.3.0" is not a chart digest: sha256: followed by 64 lowercase hex characters is required`,
		},
		"a chart from an oci:// URL": {
			bundle: strings.Replace(catalogBundle, "charts/gpu-operator", "oci://nvcr.io/nvidia/gpu-operator", 1),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].chart.path: "oci://nvcr.io/nvidia/gpu-operator" is not supported: charts come only from registry.repository, as charts/<name> or wrappers/<name>`,
		},
		"a chart outside charts/ and wrappers/": {
			bundle: strings.Replace(catalogBundle, "charts/gpu-operator", "stable/gpu-operator", 1),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].chart.path: "stable/gpu-operator" is not supported: use charts/<name> or wrappers/<name>`,
		},
		"a component in the operator's namespace": {
			bundle: bundleOf(component("nfd", "aicr-system", "")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].namespace: namespace "aicr-system" is not allowed for a component (reserved: aicr-system, argocd, default, kube-node-lease, kube-public, kube-system); use a namespace of the component's own`,
		},
		"a component in Argo CD's namespace": {
			bundle: bundleOf(component("nfd", "argocd", "")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].namespace: namespace "argocd" is not allowed for a component`,
		},
		"a component in kube-system": {
			bundle: bundleOf(component("nfd", "kube-system", "")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].namespace: namespace "kube-system" is not allowed for a component`,
		},
		"a readiness gate that depends on nothing": {
			bundle: bundleOf(component("gate", "gate", ", readinessGate: true")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].dependsOn: a readiness gate checks the components it depends on: name at least one`,
		},
		"an unknown placement class": {
			bundle: strings.Replace(catalogBundle, "class: accelerated", "class: gpu", 1),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[1].placement.class: "gpu" is not a placement class; use "system" or "accelerated"`,
		},
		"values that are not a mapping": {
			bundle: bundleOf(component("nfd", "nfd", ", values: [1, 2]")),
			layer:  layerWebhook, field: "spec.bundle.configMap",
			accepted: `components[0].values: values must be a mapping of Helm values`,
		},

		// The object and who writes it.
		"a ClusterRuntime not named cluster": {
			name: "gpu",
			// The CRD's CEL rule sits on the object's root, so the API server names no field
			// ("<nil>"); the webhook's own rule (metadata.name) never sees the object.
			layer: layerCRD, field: "<nil>",
			accepted: `the ClusterRuntime must be named cluster`,
		},
		"the operator writing a ClusterRuntime's spec": {
			asOperator: true,
			layer:      layerWebhook, field: "spec",
			accepted: `the operator (system:serviceaccount:aicr-system:aicr-operator-applier) may not write a ClusterRuntime's spec: it belongs to the platform admin`,
		},
		"a person adding the operator's cleanup finalizer": {
			finalizers: []any{v1alpha1.RuntimeFinalizer},
			layer:      layerWebhook, field: "metadata.finalizers",
			accepted: `only the operator adds or removes the finalizer operator.aicr.run/cleanup`,
		},

		// Rollout settings and policies: the CRD schema refuses them before the webhook runs.
		"parallelism 0": {
			spec:  map[string]any{"rollout": map[string]any{"parallelism": int64(0)}},
			layer: layerCRD, field: "spec.rollout.parallelism",
			accepted: `should be greater than or equal to 1`,
		},
		"parallelism 65": {
			spec:  map[string]any{"rollout": map[string]any{"parallelism": int64(65)}},
			layer: layerCRD, field: "spec.rollout.parallelism",
			accepted: `should be less than or equal to 64`,
		},
		"an unknown deletion policy": {
			spec:  map[string]any{"deletionPolicy": "Orphan"},
			layer: layerCRD, field: "spec.deletionPolicy",
			accepted: `supported values: "Retain", "Delete"`,
		},
		"an unknown deployment validation mode": {
			spec:  map[string]any{"validation": map[string]any{"deployment": "Skip"}},
			layer: layerCRD, field: "spec.validation.deployment",
			accepted: `supported values: "Enabled", "Disabled"`,
		},
	}

	admin := dyn.Resource(v1alpha1.ClusterRuntimeResource)
	operator := dynamic.NewForConfigOrDie(env.ServiceAccountConfig("aicr-system", "aicr-operator-applier")).Resource(v1alpha1.ClusterRuntimeResource)
	i := 0
	for name, tc := range cases {
		i++
		cmName := "catalog-good"
		if tc.bundle != "" {
			cmName = fmt.Sprintf("catalog-%d", i)
			if _, err := cs.CoreV1().ConfigMaps(catalogNamespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: cmName}, Data: map[string]string{"bundle.yaml": tc.bundle},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(name, func(t *testing.T) {
			spec := map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": cmName}}}
			for k, v := range tc.spec {
				spec[k] = v
			}
			objName := tc.name
			if objName == "" {
				objName = v1alpha1.RuntimeName
			}
			meta := map[string]any{"name": objName}
			if tc.finalizers != nil {
				meta["finalizers"] = tc.finalizers
			}
			rt := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "ClusterRuntime", "metadata": meta, "spec": spec,
			}}
			client := admin
			if tc.asOperator {
				client = operator
			}
			var err error
			// The API server takes a moment to start calling a newly registered webhook.
			servicetest.Poll(t, webhookActiveTimeout, "refused", func() error {
				_, err = client.Create(ctx, rt, metav1.CreateOptions{})
				if err == nil {
					_ = admin.Delete(context.WithoutCancel(ctx), objName, metav1.DeleteOptions{})
					return errors.New("created; want refused")
				}
				return nil
			})
			if err := checkRefusal(err, tc); err != nil {
				t.Error(err)
			}
		})
	}
	if len(cases) < 30 {
		t.Errorf("the catalog holds %d cases; a catalog that covers every rule has at least 30", len(cases))
	}
}

// checkRefusal checks that err is the layer's refusal with one cause at the case's field whose
// message holds what is accepted.
func checkRefusal(err error, tc catalogCase) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("refused with %v; want an API status", err)
	}
	st := status.Status()
	switch tc.layer {
	case layerWebhook:
		if st.Code != 403 || !strings.HasPrefix(st.Message, runtimeWebhookDenied) {
			return fmt.Errorf("refused by %q (code %d); want the runtime webhook's denial", st.Message, st.Code)
		}
	case layerCRD:
		if st.Reason != metav1.StatusReasonInvalid || strings.Contains(st.Message, "admission webhook") {
			return fmt.Errorf("refused by %q (reason %s); want the CRD schema's Invalid", st.Message, st.Reason)
		}
	}
	var causes []metav1.StatusCause
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			// With a schema error, the API server adds a cause saying it skipped the CEL rules.
			if tc.layer == layerCRD && strings.Contains(c.Message, "some validation rules were not checked") {
				continue
			}
			causes = append(causes, c)
		}
	}
	if len(causes) != 1 {
		return fmt.Errorf("refused with %q; want exactly one cause", st.Message)
	}
	c := causes[0]
	if c.Field != tc.field {
		return fmt.Errorf("cause field %q (message %q); want %q", c.Field, c.Message, tc.field)
	}
	if !strings.Contains(c.Message, tc.accepted) {
		return fmt.Errorf("cause message %q; want it to hold %q", c.Message, tc.accepted)
	}
	if tc.layer == layerWebhook && !strings.Contains(st.Message, tc.field+": ") {
		return fmt.Errorf("status message %q does not name the field %s", st.Message, tc.field)
	}
	return nil
}

// override is one spec.overrides item; value is JSON.
func override(componentName, path, value string) map[string]any {
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		panic(err)
	}
	return map[string]any{"component": componentName, "path": path, "value": v}
}

// startWebhook runs the webhook binary's real Main against env with a serving certificate for
// 127.0.0.1 and registers the shipped webhook configuration pointed at it; both are undone when
// the test ends.
func startWebhook(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	nats := natstest.Start(t)
	pair := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := pair.Write(t, t.TempDir())
	hook := servicetest.FreeAddr(t)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exit := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		exit <- Main(runCtx, []string{
			"--nats-url=" + nats.URL, "--kubeconfig=" + env.Kubeconfig,
			"--health-addr=" + servicetest.FreeAddr(t), "--metrics-addr=" + servicetest.FreeAddr(t), "--webhook-addr=" + hook,
			"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile, "--namespace=" + catalogNamespace,
			"--operator-identities=" + applier + ",system:serviceaccount:aicr-system:aicr-operator-planner",
			"--log-level=warn",
		}, &stderr)
	}()
	whc := shippedWebhookConfig(t, "https://"+hook+webhook.Path, pair.CAPEM)
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil {
		cancel()
		<-exit
		t.Fatalf("create webhook configuration: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), whc.Name, metav1.DeleteOptions{})
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("webhook exit code %d: %s", code, stderr.String())
		}
	})
}
