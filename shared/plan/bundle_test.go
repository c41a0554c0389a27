package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// bundleDoc is a bundle document with the given components section (YAML, indented by two).
func bundleDoc(components string) string {
	return "apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: gpu-stack, version: 1.2.0}\ncomponents:\n" + components
}

// component is one valid component in flow style, with extra fields appended.
func component(name string, extra ...string) string {
	fields := append([]string{
		"name: " + name,
		"chart: {path: charts/" + name + ", digest: " + digestA + "}",
		"namespace: " + name,
	}, extra...)
	return "  - {" + strings.Join(fields, ", ") + "}\n"
}

// TestParseBundleErrors proves that each kind of bad bundle is refused with one *Error that
// names the field at fault, the Resolved reason the planner reports, and what is accepted.
func TestParseBundleErrors(t *testing.T) {
	type want struct {
		reason string
		field  string
		// message holds fragments the message must contain: what is wrong and what is accepted.
		message []string
	}
	invalid := func(field string, message ...string) want {
		return want{reason: v1alpha1.ReasonBundleInvalid, field: field, message: message}
	}
	cases := map[string]struct {
		doc  string
		want want
	}{
		"an empty document": {
			doc:  " \n\t\n",
			want: invalid("", "bundle is empty", "apiVersion bundle.aicr.run/v1alpha1", "kind Bundle"),
		},
		"a document that is not YAML": {
			doc:  "apiVersion: [unclosed\n",
			want: invalid("", "bundle does not parse"),
		},
		"an unknown field is an error (strict YAML)": {
			doc: bundleDoc(component("nfd", "chartVersion: 1.0.0")),
			want: invalid("components[0].chartVersion", `unknown field "chartVersion"`,
				"accepted here: chart, dependsOn, name, namespace, placement, readinessGate, values"),
		},
		"an unknown field deep in a placement": {
			doc: bundleDoc(component("nfd") + component("gpu-operator", "placement: {class: system, nodeSelectorPath: [a]}")),
			want: invalid("components[1].placement.nodeSelectorPath", `unknown field "nodeSelectorPath"`,
				"accepted here: class, nodeSelectorPaths, tolerationsPaths"),
		},
		"an unknown top-level field": {
			doc:  bundleDoc(component("nfd")) + "spec: {}\n",
			want: invalid("spec", `unknown field "spec"`, "accepted here: apiVersion, components, kind, metadata"),
		},
		"a field given twice is an error": {
			doc:  bundleDoc("  - name: nfd\n    name: nfd2\n    chart: {path: charts/nfd, digest: " + digestA + "}\n    namespace: nfd\n"),
			want: invalid("", "bundle does not parse", `"name" already set`),
		},
		"the wrong apiVersion": {
			doc:  strings.Replace(bundleDoc(component("nfd")), "bundle.aicr.run/v1alpha1", "bundle.aicr.run/v1", 1),
			want: invalid("apiVersion", `"bundle.aicr.run/v1" is not supported`, `use "bundle.aicr.run/v1alpha1"`),
		},
		"the wrong kind": {
			doc:  strings.Replace(bundleDoc(component("nfd")), "kind: Bundle", "kind: Recipe", 1),
			want: invalid("kind", `"Recipe" is not supported`, `use "Bundle"`),
		},
		"a bundle without a name": {
			doc:  strings.Replace(bundleDoc(component("nfd")), "name: gpu-stack", "name: GPU_Stack", 1),
			want: invalid("metadata.name", `"GPU_Stack" is not a valid name`, "lowercase DNS-1123 name such as gpu-stack"),
		},
		"a bundle without a version": {
			doc:  strings.Replace(bundleDoc(component("nfd")), "version: 1.2.0", "version: ''", 1),
			want: invalid("metadata.version", "a version of 1 to 128 characters is required"),
		},
		"a bundle without components": {
			doc:  bundleDoc("  []\n"),
			want: invalid("components", "at least one component is required"),
		},
		"a component without a name": {
			doc:  bundleDoc("  - {chart: {path: charts/nfd, digest: " + digestA + "}, namespace: nfd}\n"),
			want: invalid("components[0].name", "a name is required", "lowercase DNS-1123 label of at most 53 characters"),
		},
		"a component name that is not a DNS-1123 label": {
			doc:  bundleDoc(component("nfd") + "  - {name: GPU.Operator, chart: {path: charts/gpu-operator, digest: " + digestA + "}, namespace: gpu-operator}\n"),
			want: invalid("components[1].name", `"GPU.Operator" is not a valid name`, "(a-z, 0-9, '-')"),
		},
		"a component name longer than an Application name may be": {
			doc:  bundleDoc(component(strings.Repeat("a", 54))),
			want: invalid("components[0].name", "is not a valid name", "at most 53 characters"),
		},
		"two components with the same name": {
			doc:  bundleDoc(component("nfd") + component("gpu-operator") + component("nfd")),
			want: invalid("components[2].name", `duplicate component "nfd" (first at components[0])`, "names must be unique"),
		},
		"a chart path with oci://": {
			doc: bundleDoc("  - {name: nfd, chart: {path: 'oci://ghcr.io/nvidia/nfd', digest: " + digestA + "}, namespace: nfd}\n"),
			want: want{reason: v1alpha1.ReasonChartSourceUnsupported, field: "components[0].chart.path",
				message: []string{`"oci://ghcr.io/nvidia/nfd" is not supported`, "charts come only from registry.repository", "charts/<name> or wrappers/<name>"}},
		},
		"a chart path with an https repository": {
			doc: bundleDoc("  - {name: nfd, chart: {path: 'https://charts.example.com/nfd', digest: " + digestA + "}, namespace: nfd}\n"),
			want: want{reason: v1alpha1.ReasonChartSourceUnsupported, field: "components[0].chart.path",
				message: []string{"charts come only from registry.repository"}},
		},
		"an absolute chart path": {
			doc: bundleDoc("  - {name: nfd, chart: {path: /charts/nfd, digest: " + digestA + "}, namespace: nfd}\n"),
			want: want{reason: v1alpha1.ReasonChartSourceUnsupported, field: "components[0].chart.path",
				message: []string{`"/charts/nfd" is not supported`}},
		},
		"a chart path outside charts/ and wrappers/": {
			doc: bundleDoc("  - {name: nfd, chart: {path: stable/nfd, digest: " + digestA + "}, namespace: nfd}\n"),
			want: want{reason: v1alpha1.ReasonChartSourceUnsupported, field: "components[0].chart.path",
				message: []string{`"stable/nfd" is not supported`, "use charts/<name> or wrappers/<name>"}},
		},
		"a chart path that climbs out of the repository": {
			doc: bundleDoc("  - {name: nfd, chart: {path: charts/../nfd, digest: " + digestA + "}, namespace: nfd}\n"),
			want: want{reason: v1alpha1.ReasonChartSourceUnsupported, field: "components[0].chart.path",
				message: []string{`"charts/../nfd" is not supported`}},
		},
		"a component without a chart path": {
			doc:  bundleDoc("  - {name: nfd, chart: {digest: " + digestA + "}, namespace: nfd}\n"),
			want: invalid("components[0].chart.path", "a chart path is required", "charts/<name> or wrappers/<name>"),
		},
		"a chart pinned by tag instead of digest": {
			doc:  bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: 0.17.3}, namespace: nfd}\n"),
			want: invalid("components[0].chart.digest", `"0.17.3" is not a chart digest`, "sha256: followed by 64 lowercase hex characters"),
		},
		"a chart digest in uppercase hex": {
			doc:  bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: " + strings.ToUpper(digestA) + "}, namespace: nfd}\n"),
			want: invalid("components[0].chart.digest", "is not a chart digest", "64 lowercase hex"),
		},
		"a chart digest one character short": {
			doc:  bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: " + digestA[:len(digestA)-1] + "}, namespace: nfd}\n"),
			want: invalid("components[0].chart.digest", "is not a chart digest"),
		},
		"a component without a namespace": {
			doc:  bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: " + digestA + "}}\n"),
			want: invalid("components[0].namespace", "a namespace is required", "lowercase DNS-1123 label"),
		},
		"a namespace that is not a DNS-1123 label": {
			doc:  bundleDoc("  - {name: nfd, chart: {path: charts/nfd, digest: " + digestA + "}, namespace: Node_Feature}\n"),
			want: invalid("components[0].namespace", `"Node_Feature" is not a valid namespace`, "lowercase DNS-1123 label of at most 63 characters"),
		},
		"a dependency on an unknown component": {
			doc: bundleDoc(component("nfd") + component("gpu-operator", "dependsOn: [nfd, cert-manager]")),
			want: invalid("components[1].dependsOn[1]", `unknown component "cert-manager"`,
				"dependsOn names components of this bundle (gpu-operator, nfd)"),
		},
		"a component that depends on itself": {
			doc:  bundleDoc(component("nfd", "dependsOn: [nfd]")),
			want: invalid("components[0].dependsOn[0]", `"nfd" depends on itself`, "name other components"),
		},
		"a dependency listed twice": {
			doc:  bundleDoc(component("nfd") + component("gpu-operator", "dependsOn: [nfd, nfd]")),
			want: invalid("components[1].dependsOn[1]", `"nfd" is listed twice`),
		},
		"a dependency cycle names the cycle": {
			doc: bundleDoc(component("nfd") + component("a", "dependsOn: [b]") + component("b", "dependsOn: [c, nfd]") + component("c", "dependsOn: [a]")),
			want: invalid("components[1].dependsOn", "dependency cycle a -> b -> c -> a",
				"dependencies must form a directed acyclic graph"),
		},
		"a cycle reached from outside it names only the cycle": {
			doc:  bundleDoc(component("top", "dependsOn: [x]") + component("x", "dependsOn: [z]") + component("z", "dependsOn: [x]")),
			want: invalid("components[1].dependsOn", "dependency cycle x -> z -> x"),
		},
		"a readiness gate without dependsOn": {
			doc:  bundleDoc(component("gpu-operator-readiness", "readinessGate: true")),
			want: invalid("components[0].dependsOn", "a readiness gate checks the components it depends on", "name at least one"),
		},
		"values that are a list": {
			doc:  bundleDoc(component("nfd", "values: [a, b]")),
			want: invalid("components[0].values", "values must be a mapping of Helm values", "got a list"),
		},
		"values that are a string": {
			doc:  bundleDoc(component("nfd", "values: 'replicas: 2'")),
			want: invalid("components[0].values", "values must be a mapping of Helm values", "got a string"),
		},
		"a placement class that does not exist": {
			doc:  bundleDoc(component("nfd", "placement: {class: gpu, nodeSelectorPaths: [nodeSelector]}")),
			want: invalid("components[0].placement.class", `"gpu" is not a placement class`, `use "system" or "accelerated"`),
		},
		"a placement without paths": {
			doc:  bundleDoc(component("nfd", "placement: {class: system}")),
			want: invalid("components[0].placement", "name at least one of nodeSelectorPaths or tolerationsPaths"),
		},
		"a node selector path with an empty key": {
			doc:  bundleDoc(component("nfd", "placement: {class: system, nodeSelectorPaths: [worker..nodeSelector]}")),
			want: invalid("components[0].placement.nodeSelectorPaths[0]", `"worker..nodeSelector" has an empty key`, "a dotted path such as driver.version"),
		},
		"a tolerations path with an unclosed bracket": {
			doc: bundleDoc(component("nfd", "placement: {class: accelerated, nodeSelectorPaths: [nodeSelector], tolerationsPaths: [tolerations, 'worker[tolerations']}")),
			want: invalid("components[0].placement.tolerationsPaths[1]", `"worker[tolerations" has an unclosed '['`,
				"keys with dots go in brackets"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := ParseBundle([]byte(tc.doc))
			if err == nil {
				t.Fatalf("ParseBundle accepted the bundle: %+v", b)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ParseBundle error is %T (%v), want *plan.Error", err, err)
			}
			if diff := cmp.Diff(tc.want.reason, pe.Reason); diff != "" {
				t.Errorf("Reason (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.field, pe.Field); diff != "" {
				t.Errorf("Field (-want +got):\n%s\nmessage: %s", diff, pe.Message)
			}
			for _, frag := range tc.want.message {
				if !strings.Contains(pe.Message, frag) {
					t.Errorf("message %q lacks %q", pe.Message, frag)
				}
			}
			if ReasonOf(err) != tc.want.reason {
				t.Errorf("ReasonOf = %s, want %s", ReasonOf(err), tc.want.reason)
			}
			if tc.want.field != "" && !strings.HasPrefix(err.Error(), tc.want.field+": ") {
				t.Errorf("Error() = %q, want it to start with the field path %q", err.Error(), tc.want.field)
			}
		})
	}
}

// TestParseBundleAccepts proves the shapes the format allows are read as written.
func TestParseBundleAccepts(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want Component
	}{
		"a wrapper chart under wrappers/": {
			doc:  bundleDoc("  - {name: nodewright-customizations, chart: {path: wrappers/nodewright-customizations, digest: " + digestA + "}, namespace: nodewright}\n"),
			want: Component{Name: "nodewright-customizations", Chart: ChartRef{Path: "wrappers/nodewright-customizations", Digest: digestA}, Namespace: "nodewright"},
		},
		"null values are no values": {
			doc:  bundleDoc(component("nfd", "values: null")),
			want: Component{Name: "nfd", Chart: ChartRef{Path: "charts/nfd", Digest: digestA}, Namespace: "nfd", Values: []byte("null")},
		},
		"a placement path with a bracketed key": {
			doc: bundleDoc(component("nfd", "placement: {class: system, nodeSelectorPaths: ['labels[node.kubernetes.io/x].nodeSelector']}")),
			want: Component{Name: "nfd", Chart: ChartRef{Path: "charts/nfd", Digest: digestA}, Namespace: "nfd",
				Placement: &ComponentPlacement{Class: PlacementSystem, NodeSelectorPaths: []string{"labels[node.kubernetes.io/x].nodeSelector"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := ParseBundle([]byte(tc.doc))
			if err != nil {
				t.Fatalf("ParseBundle: %v", err)
			}
			if diff := cmp.Diff([]Component{tc.want}, b.Components); diff != "" {
				t.Errorf("components (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseBundleJSON proves a JSON document is a bundle too: the CLI and the admission webhook
// may hand over either form.
func TestParseBundleJSON(t *testing.T) {
	doc := `{"apiVersion":"bundle.aicr.run/v1alpha1","kind":"Bundle","metadata":{"name":"s","version":"1"},` +
		`"components":[{"name":"nfd","chart":{"path":"charts/nfd","digest":"` + digestA + `"},"namespace":"nfd","values":{"a":1}}]}`
	b, err := ParseBundle([]byte(doc))
	if err != nil {
		t.Fatalf("ParseBundle: %v", err)
	}
	if got := string(b.Components[0].Values); got != `{"a":1}` {
		t.Errorf("values = %s, want {\"a\":1}", got)
	}
}

func TestParsePath(t *testing.T) {
	cases := map[string]struct {
		path string
		want []Segment
		err  string
	}{
		"dotted keys":                  {path: "driver.version", want: []Segment{{Key: "driver"}, {Key: "version"}}},
		"a bracketed key with dots":    {path: "labels[app.kubernetes.io/name]", want: []Segment{{Key: "labels"}, {Key: "app.kubernetes.io/name"}}},
		"a list index then a key":      {path: "containers[0].image", want: []Segment{{Key: "containers"}, {Index: 0, IsIndex: true}, {Key: "image"}}},
		"nested indexes":               {path: "m[1][2]", want: []Segment{{Key: "m"}, {Index: 1, IsIndex: true}, {Index: 2, IsIndex: true}}},
		"a leading bracket":            {path: "[a.b].c", want: []Segment{{Key: "a.b"}, {Key: "c"}}},
		"a zero-padded index is a key": {path: "m[01]", want: []Segment{{Key: "m"}, {Key: "01"}}},
		"an empty path":                {path: "", err: "a path is required"},
		"a trailing dot":               {path: "driver.", err: `"driver." ends with '.'`},
		"a leading dot":                {path: ".driver", err: "has an empty key"},
		"an empty bracket":             {path: "a[]", err: "has an empty '[]'"},
		"an unclosed bracket":          {path: "a[b", err: "has an unclosed '['"},
		"text right after a bracket":   {path: "a[b]c", err: "needs '.' or '[' after ']'"},
		"a stray closing bracket":      {path: "a]", err: "has an empty key or a stray"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePath(tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParsePath(%q) error = %v, want one containing %q", tc.path, err, tc.err)
				}
				if !strings.Contains(err.Error(), "a dotted path such as driver.version") {
					t.Errorf("error %q does not say what is accepted", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePath(%q): %v", tc.path, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("segments (-want +got):\n%s", diff)
			}
		})
	}
}
