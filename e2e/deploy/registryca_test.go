//go:build integration

package deploy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// A private registry CA as values.yaml documents it: registry.caFile names the file, and
// extraVolumes/extraVolumeMounts bring it in. The planner (the one binary that pulls from the
// registry) gets --registry-ca-file; every binary's Deployment mounts the volume read-only where
// the file is; without caFile no binary gets the flag.
func TestChartRegistryCA(t *testing.T) {
	const caFile = "/etc/aicr/registry-ca/ca.crt"
	objs := charttest.MustRender(t, "registry.caFile="+caFile,
		"extraVolumes[0].name=registry-ca", "extraVolumes[0].secret.secretName=registry-ca",
		"extraVolumeMounts[0].name=registry-ca", "extraVolumeMounts[0].mountPath=/etc/aicr/registry-ca", "extraVolumeMounts[0].readOnly=true")
	for _, b := range []string{v1alpha1.BinaryPlanner, v1alpha1.BinaryApplier, v1alpha1.BinaryReadiness, v1alpha1.BinaryCredRefresher, v1alpha1.BinaryAdmission} {
		args := containerArgs(t, objs, b)
		if has := slices.Contains(args, "--registry-ca-file="+caFile); has != (b == v1alpha1.BinaryPlanner) {
			t.Errorf("%s: --registry-ca-file=%s in its args is %v, want %v (%v)", b, caFile, has, b == v1alpha1.BinaryPlanner, args)
		}
		d := charttest.Find(objs, "Deployment", v1alpha1.ServiceAccountName(b))
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		if !slices.ContainsFunc(vols, func(v any) bool {
			name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
			secret, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
			return name == "registry-ca" && secret == "registry-ca"
		}) {
			t.Errorf("%s: no registry-ca volume from Secret registry-ca in %v", b, vols)
		}
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		mounts, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
		if !slices.ContainsFunc(mounts, func(m any) bool {
			mm := m.(map[string]any)
			ro, _, _ := unstructured.NestedBool(mm, "readOnly")
			return mm["name"] == "registry-ca" && mm["mountPath"] == "/etc/aicr/registry-ca" && ro
		}) {
			t.Errorf("%s: registry-ca is not mounted read-only at /etc/aicr/registry-ca: %v", b, mounts)
		}
	}
	if args := containerArgs(t, charttest.MustRender(t), v1alpha1.BinaryPlanner); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--registry-ca-file") }) {
		t.Errorf("without registry.caFile the planner's args are %v, want no --registry-ca-file", args)
	}
}
