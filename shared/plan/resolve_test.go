package plan

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestResolveErrors proves that each kind of bad runtime input is refused with one *Error that
// names the ClusterRuntime field (or bundle field) at fault and what would be accepted.
func TestResolveErrors(t *testing.T) {
	vector := readTestdata(t, "vector-bundle.yaml")
	withOverrides := func(o ...v1alpha1.Override) Inputs { return Inputs{Overrides: o} }
	override := func(component, path, value string) v1alpha1.Override {
		return v1alpha1.Override{Component: component, Path: path, Value: rawJSON(value)}
	}
	withSystem := func(np v1alpha1.NodePlacement) Inputs {
		return Inputs{Placement: &v1alpha1.Placement{System: &np}}
	}
	withAccelerated := func(np v1alpha1.NodePlacement) Inputs {
		return Inputs{Placement: &v1alpha1.Placement{Accelerated: &np}}
	}
	tolerate := func(t corev1.Toleration) v1alpha1.NodePlacement {
		return v1alpha1.NodePlacement{Tolerations: []corev1.Toleration{t}}
	}
	seconds := int64(30)
	cases := map[string]struct {
		bundle  string // a document; the test vector when empty
		in      Inputs
		reason  string
		field   string
		message []string
	}{
		"an override of a component the bundle lacks": {
			in:     withOverrides(override("gpu-operatr", "driver.version", `"1"`)),
			reason: v1alpha1.ReasonInvalidOverride, field: "spec.overrides[0].component",
			message: []string{`no component "gpu-operatr" in bundle gpu-stack 1.2.0-rc0`,
				"(components: cert-manager, gpu-operator, gpu-operator-readiness, nodewright-customizations)"},
		},
		"an override of a key the values do not declare names the keys that exist": {
			in:     withOverrides(override("gpu-operator", "driver.versoin", `"1"`)),
			reason: v1alpha1.ReasonOverridePathUnknown, field: "spec.overrides[0].path",
			message: []string{"component gpu-operator", `driver has no key "versoin"`,
				"(keys: enabled, maxUnavailable, upgradePolicy, version)", "an override may only change a value the bundle declares"},
		},
		"an override of an unknown top-level key": {
			in:     withOverrides(override("cert-manager", "installCRDs", `true`)),
			reason: v1alpha1.ReasonOverridePathUnknown, field: "spec.overrides[0].path",
			message: []string{`the values has no key "installCRDs"`, "(keys: crds, labels, replicaCount, webhook)"},
		},
		"an override that addresses a list by key": {
			in:     withOverrides(override("nodewright-customizations", "customizations.enabled", `true`)),
			reason: v1alpha1.ReasonOverridePathUnknown, field: "spec.overrides[0].path",
			message: []string{"customizations is a list; address its items by index, such as [0]"},
		},
		"an override index past the end of a list": {
			in:     withOverrides(override("nodewright-customizations", "customizations[3].enabled", `true`)),
			reason: v1alpha1.ReasonOverridePathUnknown, field: "spec.overrides[0].path",
			message: []string{"customizations has 1 items; index 3 is out of range"},
		},
		"an override below a scalar": {
			in:     withOverrides(override("gpu-operator", "driver.version.major", `1`)),
			reason: v1alpha1.ReasonOverridePathUnknown, field: "spec.overrides[0].path",
			message: []string{"driver.version is a string, which has no major"},
		},
		"an override path with bad syntax": {
			in:     withOverrides(override("gpu-operator", "driver..version", `"1"`)),
			reason: v1alpha1.ReasonInvalidOverride, field: "spec.overrides[0].path",
			message: []string{`"driver..version" has an empty key`, "a dotted path such as driver.version"},
		},
		"the same value overridden twice, spelled two ways": {
			in: withOverrides(
				override("gpu-operator", "driver.version", `"1"`),
				override("cert-manager", "replicaCount", `3`),
				override("gpu-operator", "[driver].version", `"2"`)),
			reason: v1alpha1.ReasonInvalidOverride, field: "spec.overrides[2].path",
			message: []string{"gpu-operator [driver].version is already overridden by spec.overrides[0]", "keep one"},
		},
		"an override without a value": {
			in:     withOverrides(override("gpu-operator", "driver.version", ``)),
			reason: v1alpha1.ReasonInvalidOverride, field: "spec.overrides[0].value",
			message: []string{"a value is required (use null to clear a value)"},
		},
		"an override value that is not JSON": {
			in:     withOverrides(override("gpu-operator", "driver.version", `580.82.07`)),
			reason: v1alpha1.ReasonInvalidOverride, field: "spec.overrides[0].value",
			message: []string{"not a JSON value"},
		},
		"a node selector with an invalid label key": {
			in:     withSystem(v1alpha1.NodePlacement{NodeSelector: map[string]string{"kubernetes.io/os": "linux", "node role": "x"}}),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.system.nodeSelector[node role]",
			message: []string{`"node role" is not a valid label key`, "alphanumeric characters"},
		},
		"a node selector with an invalid label value": {
			in:     withAccelerated(v1alpha1.NodePlacement{NodeSelector: map[string]string{"nvidia.com/gpu.present": "yes please"}}),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.accelerated.nodeSelector[nvidia.com/gpu.present]",
			message: []string{`"yes please" is not a valid label value`},
		},
		"a toleration with operator Equal and no key": {
			in:     withAccelerated(tolerate(corev1.Toleration{Operator: corev1.TolerationOpEqual, Value: "x"})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.accelerated.tolerations[0].operator",
			message: []string{"operator Equal needs a key", "use operator Exists to tolerate every taint"},
		},
		"a toleration with operator Exists and a value": {
			in:     withAccelerated(tolerate(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Value: "present"})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.accelerated.tolerations[0].value",
			message: []string{"operator Exists takes no value", "remove it or use operator Equal"},
		},
		"a toleration with an unknown operator": {
			in:     withSystem(tolerate(corev1.Toleration{Key: "a", Operator: "In"})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.system.tolerations[0].operator",
			message: []string{`"In" is not a toleration operator`, "use Equal or Exists"},
		},
		"a toleration with an invalid key": {
			in:     withSystem(tolerate(corev1.Toleration{Key: "-bad-", Operator: corev1.TolerationOpExists})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.system.tolerations[0].key",
			message: []string{`"-bad-" is not a valid taint key`},
		},
		"a toleration with an unknown effect": {
			in:     withSystem(tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists, Effect: "NoRun"})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.system.tolerations[0].effect",
			message: []string{`"NoRun" is not a taint effect`, "use NoSchedule, PreferNoSchedule or NoExecute"},
		},
		"tolerationSeconds without NoExecute": {
			in:     withSystem(tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: &seconds})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "spec.placement.system.tolerations[0].tolerationSeconds",
			message: []string{"tolerationSeconds applies only to effect NoExecute"},
		},
		"a placement path that crosses a value that is not a mapping": {
			bundle: bundleDoc(component("nfd", "values: {worker: on}", "placement: {class: system, nodeSelectorPaths: [worker.nodeSelector]}")),
			in:     withSystem(v1alpha1.NodePlacement{NodeSelector: map[string]string{"kubernetes.io/os": "linux"}}),
			reason: v1alpha1.ReasonInvalidPlacement, field: "components[0].placement.nodeSelectorPaths[0]",
			message: []string{"worker is a boolean, not a mapping"},
		},
		"a placement path through a list": {
			bundle: bundleDoc(component("nfd", "values: {workers: [{}]}", "placement: {class: system, tolerationsPaths: ['workers[0].tolerations']}")),
			in:     withSystem(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			reason: v1alpha1.ReasonInvalidPlacement, field: "components[0].placement.tolerationsPaths[0]",
			message: []string{"workers is a list, not a mapping"},
		},
		"a component in kube-system": {
			bundle: bundleDoc(component("nfd") + "  - {name: gpu-operator, chart: {path: charts/gpu-operator, digest: " + digestA + "}, namespace: kube-system}\n"),
			reason: v1alpha1.ReasonNamespaceNotAllowed, field: "components[1].namespace",
			message: []string{`namespace "kube-system" is not allowed for a component`,
				"(reserved: default, kube-node-lease, kube-public, kube-system)", "use a namespace of the component's own"},
		},
		"a component in the operator's own namespace": {
			bundle: bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: " + digestA + "}, namespace: aicr-system}\n"),
			in:     Inputs{ForbiddenNamespaces: []string{"aicr-system", "argocd"}},
			reason: v1alpha1.ReasonNamespaceNotAllowed, field: "components[0].namespace",
			message: []string{`namespace "aicr-system" is not allowed`, "(reserved: aicr-system, argocd, default, "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := vector
			if tc.bundle != "" {
				doc = []byte(tc.bundle)
			}
			p, err := Resolve(mustParse(t, doc), tc.in)
			if err == nil {
				t.Fatalf("Resolve succeeded with digest %s", p.Digest())
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve error is %T (%v), want *plan.Error", err, err)
			}
			if diff := cmp.Diff(tc.reason, pe.Reason); diff != "" {
				t.Errorf("Reason (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.field, pe.Field); diff != "" {
				t.Errorf("Field (-want +got):\n%s\nmessage: %s", diff, pe.Message)
			}
			for _, frag := range tc.message {
				if !strings.Contains(pe.Message, frag) {
					t.Errorf("message %q lacks %q", pe.Message, frag)
				}
			}
		})
	}
}

// TestResolveErrorOrder proves which problem is reported when there are several: a
// component's namespace or values (in component order) before the runtime's placement, that
// before a component's placement paths, and those before the overrides. The planner writes the
// error into a condition, so the choice must not depend on how Resolve goes about its work.
func TestResolveErrorOrder(t *testing.T) {
	badPath := component("a", "values: {worker: on}", "placement: {class: system, nodeSelectorPaths: [worker.nodeSelector]}")
	goodPath := func(name string) string {
		return component(name, "placement: {class: system, nodeSelectorPaths: [nodeSelector]}")
	}
	system := func(key string) Inputs {
		return Inputs{Placement: &v1alpha1.Placement{System: &v1alpha1.NodePlacement{NodeSelector: map[string]string{key: "x"}}}}
	}
	withOverride := func(in Inputs) Inputs {
		in.Overrides = []v1alpha1.Override{{Component: "missing", Path: "x", Value: rawJSON(`1`)}}
		return in
	}
	cases := map[string]struct {
		bundle *Bundle
		in     Inputs
		field  string
	}{
		"a later component's namespace before an earlier component's placement path": {
			bundle: mustParse(t, []byte(bundleDoc(badPath+goodPath("b")))),
			in:     Inputs{Placement: system("kubernetes.io/os").Placement, ForbiddenNamespaces: []string{"b"}},
			field:  "components[1].namespace",
		},
		"a later component's values before an earlier component's placement path": {
			bundle: func() *Bundle {
				b := mustParse(t, []byte(bundleDoc(badPath+goodPath("b"))))
				b.Components[1].Values = []byte(`[1]`) // Resolve is also given bundles Validate did not see
				return b
			}(),
			in:    system("kubernetes.io/os"),
			field: "components[1].values",
		},
		"the runtime's placement before a component's placement path": {
			bundle: mustParse(t, []byte(bundleDoc(badPath))),
			in:     system("bad key"),
			field:  "spec.placement.system.nodeSelector[bad key]",
		},
		"the first component's placement path in component order": {
			bundle: mustParse(t, []byte(bundleDoc(goodPath("b")+badPath+strings.Replace(badPath, "name: a", "name: c", 1)))),
			in:     system("kubernetes.io/os"),
			field:  "components[1].placement.nodeSelectorPaths[0]",
		},
		"a placement path before an override": {
			bundle: mustParse(t, []byte(bundleDoc(badPath))),
			in:     withOverride(system("kubernetes.io/os")),
			field:  "components[0].placement.nodeSelectorPaths[0]",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Resolve(tc.bundle, tc.in)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve error is %T (%v), want *plan.Error", err, err)
			}
			if diff := cmp.Diff(tc.field, pe.Field); diff != "" {
				t.Errorf("Field (-want +got):\n%s\nmessage: %s", diff, pe.Message)
			}
		})
	}
}

// TestResolvePlacementErrorIsStable proves that with both placement classes invalid the same
// error comes back every time: the planner writes it into a condition, and a message that
// changed from one reconcile to the next would rewrite the status forever.
func TestResolvePlacementErrorIsStable(t *testing.T) {
	b := mustParse(t, readTestdata(t, "vector-bundle.yaml"))
	bad := &v1alpha1.NodePlacement{NodeSelector: map[string]string{"bad key": "x"}}
	in := Inputs{Placement: &v1alpha1.Placement{System: bad, Accelerated: bad}}
	for range 50 {
		_, err := Resolve(b, in)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("Resolve error = %v, want *plan.Error", err)
		}
		if pe.Field != "spec.placement.system.nodeSelector[bad key]" {
			t.Fatalf("Field = %s, want the system class reported first every time", pe.Field)
		}
	}
}

// TestResolveOverrides proves what an override does to the final values.
func TestResolveOverrides(t *testing.T) {
	b := mustParse(t, readTestdata(t, "vector-bundle.yaml"))
	cases := map[string]struct {
		override v1alpha1.Override
		release  string
		want     string // the release's values JSON fragment that must appear
	}{
		"a scalar is replaced by an object": {
			override: v1alpha1.Override{Component: "gpu-operator", Path: "toolkit.enabled", Value: rawJSON(`{"x": 1}`)},
			release:  "gpu-operator", want: `"toolkit":{"enabled":{"x":1}}`,
		},
		"null clears a value": {
			override: v1alpha1.Override{Component: "cert-manager", Path: "webhook.timeoutSeconds", Value: rawJSON(`null`)},
			release:  "cert-manager", want: `"timeoutSeconds":null`,
		},
		"a number keeps its spelling": {
			override: v1alpha1.Override{Component: "cert-manager", Path: "replicaCount", Value: rawJSON(`3.0e0`)},
			release:  "cert-manager", want: `"replicaCount":3.0e0`,
		},
		"an override replaces the placement written at the same path": {
			override: v1alpha1.Override{Component: "cert-manager", Path: "nodeSelector", Value: rawJSON(`{"pool":"infra"}`)},
			release:  "cert-manager", want: `"nodeSelector":{"pool":"infra"}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := vectorInputs()
			in.Overrides = []v1alpha1.Override{tc.override}
			got := valuesOf(t, mustResolve(t, b, in), tc.release)
			if !strings.Contains(got, tc.want) {
				t.Errorf("values %s lack %s", got, tc.want)
			}
		})
	}
}

// TestAnOverrideInsideAPlacementChangesOnlyThatPath: every placement path gets its own copy of
// the rendered placement, so an override of one placed key changes that path of that release
// only, not the same placement written at another path or into another release.
func TestAnOverrideInsideAPlacementChangesOnlyThatPath(t *testing.T) {
	b := mustParse(t, readTestdata(t, "vector-bundle.yaml"))
	in := vectorInputs()
	in.Overrides = []v1alpha1.Override{{Component: "cert-manager", Path: "nodeSelector[kubernetes.io/os]", Value: rawJSON(`"windows"`)}}
	p := mustResolve(t, b, in)
	for _, c := range []struct{ release, want string }{
		{"cert-manager", `"nodeSelector":{"kubernetes.io/os":"windows","node-role.kubernetes.io/control-plane":""}`},
		{"cert-manager", `"webhook":{"nodeSelector":{"kubernetes.io/os":"linux","node-role.kubernetes.io/control-plane":""}`},
		{"nodewright-customizations", `"controller":{"nodeSelector":{"kubernetes.io/os":"linux","node-role.kubernetes.io/control-plane":""}}`},
	} {
		if got := valuesOf(t, p, c.release); !strings.Contains(got, c.want) {
			t.Errorf("values of %s %s lack %s", c.release, got, c.want)
		}
	}
}

// valuesOf returns the values JSON of the named release of p.
func valuesOf(t *testing.T, p *Plan, release string) string {
	t.Helper()
	r, ok := p.Release(release)
	if !ok {
		t.Fatalf("release %s missing", release)
	}
	got, err := r.ValuesJSON()
	if err != nil {
		t.Fatalf("ValuesJSON: %v", err)
	}
	return string(got)
}

// TestResolveLeavesBundleAlone proves that placement and overrides do not write into the bundle
// the caller holds: the planner resolves one parsed bundle for several inputs.
func TestResolveLeavesBundleAlone(t *testing.T) {
	b := mustParse(t, readTestdata(t, "vector-bundle.yaml"))
	plain := mustResolve(t, b, Inputs{})
	mustResolve(t, b, vectorInputs())
	again := mustResolve(t, b, Inputs{})
	if plain.Digest() != again.Digest() {
		t.Errorf("a Resolve with inputs changed the next Resolve without: %s != %s", plain.Digest(), again.Digest())
	}
}

// TestPlanTooLarge proves that CheckSize and ConfigMap refuse a plan too large for a ConfigMap
// with ContentTooLarge and a message naming its size and the limit, whether the bundle's
// values or the runtime's overrides make it too large, and accept one that fits.
func TestPlanTooLarge(t *testing.T) {
	big := strings.Repeat("x", MaxPlanBytes)
	tests := map[string]struct {
		bundle string
		in     Inputs
		tooBig bool
	}{
		"a plan that fits":    {bundle: bundleDoc(component("nfd", "values: {blob: small}"))},
		"the bundle's values": {bundle: bundleDoc(component("nfd", "values: {blob: "+big+"}")), tooBig: true},
		"an override on a small bundle": {
			bundle: bundleDoc(component("nfd", "values: {blob: small}")),
			in:     Inputs{Overrides: []v1alpha1.Override{{Component: "nfd", Path: "blob", Value: rawJSON(`"` + big + `"`)}}},
			tooBig: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := mustResolve(t, mustParse(t, []byte(tc.bundle)), tc.in)
			sizeErr := p.CheckSize()
			_, cmErr := p.ConfigMap("aicr-system")
			if !tc.tooBig {
				if sizeErr != nil || cmErr != nil {
					t.Fatalf("a plan of %d bytes refused: %v, %v", len(p.Canonical()), sizeErr, cmErr)
				}
				return
			}
			checkTooLarge(t, sizeErr)
			checkTooLarge(t, cmErr)
		})
	}
}

func checkTooLarge(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want *plan.Error", err)
	}
	if pe.Reason != v1alpha1.ReasonContentTooLarge {
		t.Errorf("Reason = %s, want %s", pe.Reason, v1alpha1.ReasonContentTooLarge)
	}
	if !regexp.MustCompile(`^the plan is 9[0-9]{5} bytes; `).MatchString(pe.Message) {
		t.Errorf("message %q does not name the plan's size", pe.Message)
	}
	for _, frag := range []string{"a plan ConfigMap holds at most 921600", "reduce values or components"} {
		if !strings.Contains(pe.Message, frag) {
			t.Errorf("message %q lacks %q", pe.Message, frag)
		}
	}
}
