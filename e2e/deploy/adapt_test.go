//go:build integration

package deploy

import (
	"fmt"
	"slices"
	"strings"
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
		"image.digests pins a binary's image by digest, the others keep the tag": {
			set: []string{"image.digests.planner=" + digest, "image.digests.setup=" + digest},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, o := range objs {
					spec := podSpec(o)
					if spec == nil || o.GetKind() == "StatefulSet" {
						continue
					}
					img := spec["containers"].([]any)[0].(map[string]any)["image"]
					pinned := o.GetName() == v1alpha1.ServiceAccountName("planner") || o.GetKind() == "Job"
					if want := strings.HasSuffix(fmt.Sprint(img), "@"+digest); want != pinned {
						t.Errorf("%s %s: image %v (pinned by digest: %v)", o.GetKind(), o.GetName(), img, pinned)
					}
				}
			},
		},
		"fullnameOverride and nameOverride name every object": {
			set: []string{"fullnameOverride=corp-aicr", "nameOverride=gpu-operator-ctl"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, o := range objs {
					if o.GetKind() == "Deployment" && !strings.HasPrefix(o.GetName(), "corp-aicr-") {
						t.Errorf("Deployment %s: not prefixed by fullnameOverride", o.GetName())
					}
					if l := o.GetLabels()["app.kubernetes.io/name"]; l != "gpu-operator-ctl" && o.GetKind() != "CustomResourceDefinition" {
						t.Errorf("%s %s: app.kubernetes.io/name %q", o.GetKind(), o.GetName(), l)
					}
				}
				if charttest.Find(objs, "Deployment", "corp-aicr-planner") == nil {
					t.Error("no Deployment corp-aicr-planner")
				}
			},
		},
		"serviceAccount.create false with a name: no ServiceAccount, that name everywhere": {
			set: []string{"planner.serviceAccount.create=false", "planner.serviceAccount.name=corp-planner"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if sa := charttest.Find(objs, "ServiceAccount", v1alpha1.ServiceAccountName("planner")); sa != nil {
					t.Error("the planner's ServiceAccount rendered with create false")
				}
				if sa, _, _ := unstructured.NestedString(charttest.Find(objs, "Deployment", v1alpha1.ServiceAccountName("planner")).Object,
					"spec", "template", "spec", "serviceAccountName"); sa != "corp-planner" {
					t.Errorf("planner's serviceAccountName %q", sa)
				}
				bound := false
				for _, o := range objs {
					if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
						continue
					}
					subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
					if contains(subjects, "map[kind:ServiceAccount name:corp-planner namespace:"+charttest.Namespace+"]") {
						bound = true
					}
					if contains(subjects, "map[kind:ServiceAccount name:"+v1alpha1.ServiceAccountName("planner")+" namespace:"+charttest.Namespace+"]") {
						t.Errorf("%s %s still binds the chart's planner ServiceAccount", o.GetKind(), o.GetName())
					}
				}
				if !bound {
					t.Error("no binding grants corp-planner the planner's rights")
				}
				if args := containerArgs(t, objs, "admission"); !slices.Contains(args, "--operator-identities=system:serviceaccount:"+charttest.Namespace+":corp-planner,"+
					strings.Join(identities(binaries[1:]), ",")) {
					t.Errorf("admission's operator identities %v", args)
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
	for _, bad := range []string{"extraVolumeMounts[0].name=x", "image.digests.planner=latest", "image.digests.nats=" + digest} {
		if _, err := charttest.Render(t, charttest.Release, charttest.Namespace, "registry.repository="+charttest.Repository, bad); err == nil {
			t.Errorf("%s rendered; the schema must refuse it", bad)
		}
	}
}

// digest is a well-formed image digest.
const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// identities are the Kubernetes users of the binaries' default ServiceAccounts.
func identities(bs []string) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, "system:serviceaccount:"+charttest.Namespace+":"+v1alpha1.ServiceAccountName(b))
	}
	return ids
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
