//go:build integration

package deploy

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// podSpec is the pod template's spec of a Deployment, StatefulSet or Job; nil for other kinds.
func podSpec(o *unstructured.Unstructured) map[string]any {
	switch o.GetKind() {
	case "Deployment", "StatefulSet", "Job":
		s, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		return s
	}
	return nil
}

// binaryDeployments are the five binaries' Deployments of a render.
func binaryDeployments(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var ds []*unstructured.Unstructured
	for _, b := range binaries {
		d := charttest.Find(objs, "Deployment", v1alpha1.ServiceAccountName(b))
		if d == nil {
			t.Fatalf("no Deployment for %s", b)
		}
		ds = append(ds, d)
	}
	return ds
}

// TestChartValuesCompaniesAdapt: each value a platform team adapts the chart with, and what the
// render must show for it (docs/install.md, "Adapting the chart").
func TestChartValuesCompaniesAdapt(t *testing.T) {
	for name, tc := range map[string]struct {
		set   []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		"defaults fix no UID for the binaries and the setup Job (OpenShift restricted-v2)": {
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				n := 0
				for _, o := range objs {
					spec := podSpec(o)
					if spec == nil || o.GetKind() == "StatefulSet" {
						continue
					}
					n++
					sc, _ := spec["securityContext"].(map[string]any)
					for _, k := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
						if _, ok := sc[k]; ok {
							t.Errorf("%s %s: pod securityContext.%s fixed by default", o.GetKind(), o.GetName(), k)
						}
					}
					if sc["runAsNonRoot"] != true {
						t.Errorf("%s %s: runAsNonRoot %v", o.GetKind(), o.GetName(), sc["runAsNonRoot"])
					}
					for _, c := range spec["containers"].([]any) {
						csc, _ := c.(map[string]any)["securityContext"].(map[string]any)
						if _, ok := csc["runAsUser"]; ok || csc["readOnlyRootFilesystem"] != true || csc["allowPrivilegeEscalation"] != false ||
							fmt.Sprint(csc["capabilities"]) != "map[drop:[ALL]]" {
							t.Errorf("%s %s: container securityContext %v", o.GetKind(), o.GetName(), csc)
						}
					}
				}
				if n != len(binaries)+1 {
					t.Errorf("checked %d pod templates, want the %d binaries' and the setup Job's", n, len(binaries)+1)
				}
			},
		},
		"podSecurityContext and containerSecurityContext replace the defaults": {
			set: []string{"podSecurityContext.runAsUser=1001", "containerSecurityContext.runAsUser=1001"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, d := range binaryDeployments(t, objs) {
					spec := podSpec(d)
					if u, _, _ := unstructured.NestedFieldNoCopy(spec, "securityContext", "runAsUser"); fmt.Sprint(u) != "1001" {
						t.Errorf("%s: pod runAsUser %v", d.GetName(), u)
					}
					c := spec["containers"].([]any)[0].(map[string]any)
					if u, _, _ := unstructured.NestedFieldNoCopy(c, "securityContext", "runAsUser"); fmt.Sprint(u) != "1001" {
						t.Errorf("%s: container runAsUser %v", d.GetName(), u)
					}
				}
			},
		},
		"commonLabels on every object": {
			set: []string{"commonLabels.team=gpu-platform"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, o := range objs {
					if o.GetLabels()["team"] != "gpu-platform" {
						t.Errorf("%s %s: labels %v", o.GetKind(), o.GetName(), o.GetLabels())
					}
				}
			},
		},
		"podLabels on the binaries' pods, not in their selectors": {
			set: []string{"podLabels.cost-center=ml"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, d := range binaryDeployments(t, objs) {
					labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
					sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
					if labels["cost-center"] != "ml" || sel["cost-center"] != "" {
						t.Errorf("%s: pod labels %v, selector %v", d.GetName(), labels, sel)
					}
				}
			},
		},
		"a private CA bundle: extraEnv, extraVolumes, extraVolumeMounts": {
			set: []string{"extraEnv[0].name=SSL_CERT_FILE", "extraEnv[0].value=/etc/aicr-ca/ca.crt",
				"extraVolumes[0].name=private-ca", "extraVolumes[0].configMap.name=corp-ca",
				"extraVolumeMounts[0].name=private-ca", "extraVolumeMounts[0].mountPath=/etc/aicr-ca", "extraVolumeMounts[0].readOnly=true"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, d := range binaryDeployments(t, objs) {
					spec := podSpec(d)
					c := spec["containers"].([]any)[0].(map[string]any)
					if !contains(c["env"], "map[name:SSL_CERT_FILE value:/etc/aicr-ca/ca.crt]") {
						t.Errorf("%s: env %v", d.GetName(), c["env"])
					}
					if !contains(c["volumeMounts"], "map[mountPath:/etc/aicr-ca name:private-ca readOnly:true]") {
						t.Errorf("%s: volumeMounts %v", d.GetName(), c["volumeMounts"])
					}
					if !contains(spec["volumes"], "map[configMap:map[name:corp-ca] name:private-ca]") {
						t.Errorf("%s: volumes %v", d.GetName(), spec["volumes"])
					}
				}
			},
		},
		"global values of a parent chart are accepted": {
			set: []string{"global.imageRegistry=registry.example.com", "global.team=gpu"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if len(binaryDeployments(t, objs)) != len(binaries) {
					t.Error("render with global values lost a Deployment")
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tc.check(t, charttest.MustRender(t, tc.set...))
		})
	}

	// The schema still names what it refuses.
	if _, err := charttest.Render(t, charttest.Release, charttest.Namespace, "registry.repository="+charttest.Repository, "extraVolumeMounts[0].name=x"); err == nil {
		t.Error("an extraVolumeMount without mountPath rendered")
	}
}

// contains says whether the list l holds an element printed as want.
func contains(l any, want string) bool {
	items, _ := l.([]any)
	for _, i := range items {
		if fmt.Sprint(i) == want {
			return true
		}
	}
	return false
}
