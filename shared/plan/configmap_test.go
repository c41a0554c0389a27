package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestConfigMapRoundTrip proves a stored plan reads back as the same plan: the applier and
// readiness load plans by digest and must render exactly what the planner resolved.
func TestConfigMapRoundTrip(t *testing.T) {
	p := mustResolve(t, mustParse(t, readTestdata(t, "vector-bundle.yaml")), vectorInputs())
	cm, err := p.ConfigMap("aicr-system")
	if err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	hex := strings.TrimPrefix(vectorDigest, "sha256:")
	if cm.Name != "aicr-plan-"+hex || cm.Name != ConfigMapName(p.Digest()) {
		t.Errorf("name = %s, want aicr-plan-%s", cm.Name, hex)
	}
	if cm.Namespace != "aicr-system" {
		t.Errorf("namespace = %s, want aicr-system", cm.Namespace)
	}
	if cm.Immutable == nil || !*cm.Immutable {
		t.Errorf("the plan ConfigMap is not immutable")
	}
	wantLabels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRole: v1alpha1.PlanRoleValue}
	if diff := cmp.Diff(wantLabels, cm.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if cm.Annotations[v1alpha1.AnnotationPlanDigest] != vectorDigest {
		t.Errorf("digest annotation = %q, want %s", cm.Annotations[v1alpha1.AnnotationPlanDigest], vectorDigest)
	}

	got, err := FromConfigMap(cm)
	if err != nil {
		t.Fatalf("FromConfigMap: %v", err)
	}
	if got.Digest() != p.Digest() || !bytes.Equal(got.Canonical(), p.Canonical()) {
		t.Errorf("read back digest %s, want %s", got.Digest(), p.Digest())
	}
	if diff := cmp.Diff(p, got, cmpopts.IgnoreUnexported(Plan{})); diff != "" {
		t.Errorf("plan read back (-want +got):\n%s", diff)
	}
	r, ok := got.Release("gpu-operator")
	if !ok || r.Chart.Digest != "sha256:1111111111111111111111111111111111111111111111111111111111111111" {
		t.Errorf("Release(gpu-operator) = %+v, %v", r, ok)
	}
	if _, ok := got.Release("nfd"); ok {
		t.Errorf("Release(nfd) found a release the plan lacks")
	}
	if steps := Steps(p, got, StepOptions{}); len(steps) != 0 {
		t.Errorf("Steps between a plan and its stored copy = %+v, want none", steps)
	}
}

// TestFromConfigMapRefuses proves a stored plan that is not what its name and annotation say is
// refused rather than rendered.
func TestFromConfigMapRefuses(t *testing.T) {
	p := mustResolve(t, mustParse(t, readTestdata(t, "vector-bundle.yaml")), vectorInputs())
	cases := map[string]struct {
		edit func(cm *corev1.ConfigMap)
		want string
	}{
		"content edited after it was stored": {
			edit: func(cm *corev1.ConfigMap) {
				cm.Data[v1alpha1.PlanDataKey] = strings.Replace(cm.Data[v1alpha1.PlanDataKey], "580.82.07", "580.82.08", 1)
			},
			want: "content digest sha256:",
		},
		"the digest annotation of another plan": {
			edit: func(cm *corev1.ConfigMap) {
				cm.Annotations[v1alpha1.AnnotationPlanDigest] = "sha256:" + strings.Repeat("0", 64)
			},
			want: "does not match sha256:0000",
		},
		"no digest annotation": {
			edit: func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.AnnotationPlanDigest) },
			want: "annotation operator.aicr.run/plan-digest is missing",
		},
		"not labelled as a plan": {
			edit: func(cm *corev1.ConfigMap) { delete(cm.Labels, v1alpha1.LabelRole) },
			want: "not labelled operator.aicr.run/role=plan",
		},
		"no plan key": {
			edit: func(cm *corev1.ConfigMap) { delete(cm.Data, v1alpha1.PlanDataKey) },
			want: "key plan.json is missing",
		},
		"an unknown field in the plan": {
			edit: func(cm *corev1.ConfigMap) {
				cm.Data[v1alpha1.PlanDataKey] = strings.Replace(cm.Data[v1alpha1.PlanDataKey], `{"apiVersion"`, `{"extra":1,"apiVersion"`, 1)
			},
			want: `unknown field "extra"`,
		},
		"a plan format this version does not read": {
			edit: func(cm *corev1.ConfigMap) {
				cm.Data[v1alpha1.PlanDataKey] = strings.Replace(cm.Data[v1alpha1.PlanDataKey], PlanAPIVersion, "plan.aicr.run/v2", 1)
			},
			want: `apiVersion "plan.aicr.run/v2" is not supported; expected "plan.aicr.run/v1alpha1"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm, err := p.ConfigMap("aicr-system")
			if err != nil {
				t.Fatalf("ConfigMap: %v", err)
			}
			tc.edit(cm)
			got, err := FromConfigMap(cm)
			if err == nil {
				t.Fatalf("FromConfigMap accepted it: digest %s", got.Digest())
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "read plan aicr-system/"+cm.Name) {
				t.Errorf("error %q, want it to name the ConfigMap and contain %q", err, tc.want)
			}
		})
	}
}

// TestDecodeWithoutDigest proves Decode without an expected digest still computes it.
func TestDecodeWithoutDigest(t *testing.T) {
	d, err := Decode(readTestdata(t, "vector-plan.json"), "")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if d.Digest() != vectorDigest {
		t.Errorf("Digest() = %s, want %s", d.Digest(), vectorDigest)
	}
}

// A sealed plan keeps its values only as canonical JSON: the decoded maps, about seven times the
// JSON's size, would otherwise stay in every plan cache. Each release's ValuesJSON is its span
// of the canonical form, and a plan composed of sealed releases encodes them as they were.
func TestASealedPlanKeepsValuesOnlyAsCanonicalJSON(t *testing.T) {
	p := mustResolve(t, mustParse(t, readTestdata(t, "vector-bundle.yaml")), vectorInputs())
	read, err := Decode(p.Canonical(), p.Digest())
	if err != nil {
		t.Fatal(err)
	}
	for _, sealed := range []*Plan{p, read} {
		_, spans, err := sealed.appendCanonical(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range sealed.Releases {
			if r.Values != nil {
				t.Errorf("release %s of a sealed plan keeps its decoded values", r.Name)
			}
			got, err := r.ValuesJSON()
			s := spans[i]
			if err != nil || !bytes.Equal(got, sealed.Canonical()[s[0]:s[1]]) {
				t.Errorf("ValuesJSON of %s = %s, %v; want its span of the canonical form", r.Name, got, err)
			}
		}
	}
	composed, err := Compose(read.Bundle, read.Releases)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(composed.Canonical(), p.Canonical()) || composed.Digest() != p.Digest() {
		t.Errorf("a plan composed of a decoded plan's releases encodes differently:\n%s\nwant\n%s", composed.Canonical(), p.Canonical())
	}
}
