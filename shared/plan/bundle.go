package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Bundle format identifiers.
const (
	// BundleAPIVersion is the only bundle format version this package reads.
	BundleAPIVersion = "bundle.aicr.run/v1alpha1"
	// BundleKind is the bundle document's kind.
	BundleKind = "Bundle"
)

// Limits on a bundle.
const (
	// MaxBundleBytes bounds the bundle document.
	MaxBundleBytes = 16 << 20
	// MaxComponents bounds the number of components in a bundle.
	MaxComponents = 20000
	// MaxDependsOn bounds one component's dependencies.
	MaxDependsOn = 256
	// MaxNameLength bounds component names: an Application name and a label value.
	MaxNameLength = 53
)

// Placement classes a component can declare.
const (
	PlacementSystem      = "system"
	PlacementAccelerated = "accelerated"
)

// Chart path prefixes under registry.repository.
const (
	ChartsPrefix   = "charts/"
	WrappersPrefix = "wrappers/"
)

// Bundle is a versioned list of components: the input a plan is resolved from.
type Bundle struct {
	// APIVersion must be BundleAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind must be BundleKind.
	Kind string `json:"kind"`
	// Metadata names and versions the bundle.
	Metadata BundleMeta `json:"metadata"`
	// Components are the releases of the stack.
	Components []Component `json:"components"`
}

// BundleMeta names and versions a bundle.
type BundleMeta struct {
	// Name of the bundle, such as "gpu-stack".
	Name string `json:"name"`
	// Version of the bundle, such as "1.2.0".
	Version string `json:"version"`
}

// Component is one release of the stack.
type Component struct {
	// Name is the release name: the Application's name. A DNS-1123 label.
	Name string `json:"name"`
	// Chart is the OCI Helm chart, under registry.repository, pinned by digest.
	Chart ChartRef `json:"chart"`
	// Namespace the release is installed into. The chart pre-creates it.
	Namespace string `json:"namespace"`
	// DependsOn names the components that must be ready first.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Values are the Helm values (a mapping).
	Values json.RawMessage `json:"values,omitempty"`
	// ReadinessGate marks an AICR readiness gate: a chart whose Job checks the components it
	// depends on. It is synced explicitly in each of its steps.
	ReadinessGate bool `json:"readinessGate,omitempty"`
	// Placement says where the runtime's placement goes in the values.
	Placement *ComponentPlacement `json:"placement,omitempty"`
}

// ChartRef is a chart path under registry.repository and its manifest digest.
type ChartRef struct {
	// Path is "charts/<name>" or "wrappers/<name>".
	Path string `json:"path"`
	// Digest is "sha256:<64 hex>".
	Digest string `json:"digest"`
}

// ComponentPlacement declares which placement class a component follows and where in its
// values the node selector and tolerations go.
type ComponentPlacement struct {
	// Class is "system" or "accelerated".
	Class string `json:"class"`
	// NodeSelectorPaths are value paths that receive the node selector.
	NodeSelectorPaths []string `json:"nodeSelectorPaths,omitempty"`
	// TolerationsPaths are value paths that receive the tolerations.
	TolerationsPaths []string `json:"tolerationsPaths,omitempty"`
}

var (
	digestRE    = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	chartPathRE = regexp.MustCompile(`^(charts|wrappers)/[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// ParseBundle reads and validates a bundle document (YAML or JSON). Unknown fields are errors.
// The error is a *Error naming the field path and what is accepted.
func ParseBundle(data []byte) (*Bundle, error) {
	if len(data) > MaxBundleBytes {
		return nil, errorf(v1alpha1.ReasonContentTooLarge, "", "bundle is %d bytes; at most %d are accepted", len(data), MaxBundleBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, bundleErr("", "bundle is empty; expected a document with apiVersion %s, kind %s and components", BundleAPIVersion, BundleKind)
	}
	var b Bundle
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		if uerr := unknownFieldError(data); uerr != nil {
			return nil, uerr
		}
		return nil, bundleErr("", "bundle does not parse: %s", cleanDecodeError(err))
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// cleanDecodeError strips the decoder's layering from a message so a person reads the cause.
func cleanDecodeError(err error) string {
	msg := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// unknownFieldError finds the first field of the document (keys sorted at each level) that the
// bundle format does not declare, and names its path and the fields accepted there. The strict
// decoder only says "unknown field" without saying where; it returns nil when it finds none.
func unknownFieldError(data []byte) *Error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil
	}
	doc, err := decodeValue(j)
	if err != nil {
		return nil
	}
	field, name, accepted := findUnknownField(doc, reflect.TypeFor[Bundle](), "")
	if field == "" {
		return nil
	}
	return bundleErr(field, "unknown field %q; accepted here: %s", name, strings.Join(accepted, ", "))
}

// findUnknownField walks a decoded document alongside the type it decodes into. Keys match
// field names case-insensitively, as the decoder does.
func findUnknownField(v any, t reflect.Type, path string) (field, name string, accepted []string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return "", "", nil
		}
		fields := make(map[string]reflect.Type, t.NumField())
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = t.Field(i).Type
				accepted = append(accepted, tag)
			}
		}
		sort.Strings(accepted)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var ft reflect.Type
			for tag, typ := range fields {
				if strings.EqualFold(tag, k) {
					ft = typ
					break
				}
			}
			at := k
			if path != "" {
				at = path + "." + k
			}
			if ft == nil {
				return at, k, accepted
			}
			if f, n, a := findUnknownField(m[k], ft, at); f != "" {
				return f, n, a
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // json.RawMessage: free-form values
			return "", "", nil
		}
		l, _ := v.([]any)
		for i, x := range l {
			if f, n, a := findUnknownField(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f, n, a
			}
		}
	}
	return "", "", nil
}

// Validate checks the bundle: identifiers, names, charts, digests, namespaces, dependencies
// (unknown, self, duplicate, cycles), values and placement declarations. It returns the first
// problem, in document order, as a *Error.
func (b *Bundle) Validate() error {
	if b.APIVersion != BundleAPIVersion {
		return bundleErr("apiVersion", "%q is not supported; use %q", b.APIVersion, BundleAPIVersion)
	}
	if b.Kind != BundleKind {
		return bundleErr("kind", "%q is not supported; use %q", b.Kind, BundleKind)
	}
	if errs := validation.IsDNS1123Subdomain(b.Metadata.Name); b.Metadata.Name == "" || len(errs) > 0 {
		return bundleErr("metadata.name", "%q is not a valid name: a lowercase DNS-1123 name such as gpu-stack is required", b.Metadata.Name)
	}
	if b.Metadata.Version == "" || len(b.Metadata.Version) > 128 {
		return bundleErr("metadata.version", "a version of 1 to 128 characters is required, such as 1.2.0")
	}
	if len(b.Components) == 0 {
		return bundleErr("components", "at least one component is required")
	}
	if len(b.Components) > MaxComponents {
		return errorf(v1alpha1.ReasonContentTooLarge, "components", "%d components; at most %d are accepted", len(b.Components), MaxComponents)
	}
	index := make(map[string]int, len(b.Components))
	for i := range b.Components {
		c := &b.Components[i]
		f := fmt.Sprintf("components[%d]", i)
		if err := validateName(f+".name", c.Name); err != nil {
			return err
		}
		if j, dup := index[c.Name]; dup {
			return bundleErr(f+".name", "duplicate component %q (first at components[%d]); names must be unique", c.Name, j)
		}
		index[c.Name] = i
	}
	for i := range b.Components {
		if err := b.validateComponent(i, index); err != nil {
			return err
		}
	}
	if cycle := findCycle(b.Components, index); cycle != nil {
		return bundleErr(fmt.Sprintf("components[%d].dependsOn", index[cycle[0]]),
			"dependency cycle %s; dependencies must form a directed acyclic graph", strings.Join(cycle, " -> "))
	}
	return nil
}

func validateName(field, name string) error {
	if name == "" {
		return bundleErr(field, "a name is required: a lowercase DNS-1123 label of at most %d characters", MaxNameLength)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 || len(name) > MaxNameLength {
		return bundleErr(field, "%q is not a valid name: a lowercase DNS-1123 label of at most %d characters (a-z, 0-9, '-') is required", name, MaxNameLength)
	}
	return nil
}

func (b *Bundle) validateComponent(i int, index map[string]int) error {
	c := &b.Components[i]
	f := fmt.Sprintf("components[%d]", i)
	switch {
	case c.Chart.Path == "":
		return bundleErr(f+".chart.path", "a chart path is required: charts/<name> or wrappers/<name> under registry.repository")
	case strings.Contains(c.Chart.Path, "://") || strings.HasPrefix(c.Chart.Path, "/"):
		return errorf(v1alpha1.ReasonChartSourceUnsupported, f+".chart.path",
			"%q is not supported: charts come only from registry.repository, as charts/<name> or wrappers/<name>", c.Chart.Path)
	case !chartPathRE.MatchString(c.Chart.Path):
		return errorf(v1alpha1.ReasonChartSourceUnsupported, f+".chart.path",
			"%q is not supported: use charts/<name> or wrappers/<name>, with a lowercase DNS-1123 name", c.Chart.Path)
	}
	if !digestRE.MatchString(c.Chart.Digest) {
		return bundleErr(f+".chart.digest", "%q is not a chart digest: sha256: followed by 64 lowercase hex characters is required (charts are pinned by digest)", c.Chart.Digest)
	}
	if c.Namespace == "" {
		return bundleErr(f+".namespace", "a namespace is required: a lowercase DNS-1123 label")
	}
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return bundleErr(f+".namespace", "%q is not a valid namespace: a lowercase DNS-1123 label of at most 63 characters is required", c.Namespace)
	}
	if len(c.DependsOn) > MaxDependsOn {
		return bundleErr(f+".dependsOn", "%d dependencies; at most %d are accepted", len(c.DependsOn), MaxDependsOn)
	}
	seen := make(map[string]bool, len(c.DependsOn))
	for j, d := range c.DependsOn {
		df := fmt.Sprintf("%s.dependsOn[%d]", f, j)
		switch _, known := index[d]; {
		case d == c.Name:
			return bundleErr(df, "%q depends on itself; name other components", d)
		case !known:
			return bundleErr(df, "unknown component %q; dependsOn names components of this bundle (%s)", d, knownNames(index))
		case seen[d]:
			return bundleErr(df, "%q is listed twice", d)
		}
		seen[d] = true
	}
	if c.ReadinessGate && len(c.DependsOn) == 0 {
		return bundleErr(f+".dependsOn", "a readiness gate checks the components it depends on: name at least one")
	}
	if len(bytes.TrimSpace(c.Values)) > 0 && !bytes.Equal(bytes.TrimSpace(c.Values), []byte("null")) {
		if _, err := decodeObject(c.Values); err != nil {
			return bundleErr(f+".values", "values must be a mapping of Helm values: %v", err)
		}
	}
	if p := c.Placement; p != nil {
		if p.Class != PlacementSystem && p.Class != PlacementAccelerated {
			return bundleErr(f+".placement.class", "%q is not a placement class; use %q or %q", p.Class, PlacementSystem, PlacementAccelerated)
		}
		if len(p.NodeSelectorPaths)+len(p.TolerationsPaths) == 0 {
			return bundleErr(f+".placement", "name at least one of nodeSelectorPaths or tolerationsPaths")
		}
		for j, path := range p.NodeSelectorPaths {
			if _, err := ParsePath(path); err != nil {
				return bundleErr(fmt.Sprintf("%s.placement.nodeSelectorPaths[%d]", f, j), "%v", err)
			}
		}
		for j, path := range p.TolerationsPaths {
			if _, err := ParsePath(path); err != nil {
				return bundleErr(fmt.Sprintf("%s.placement.tolerationsPaths[%d]", f, j), "%v", err)
			}
		}
	}
	return nil
}

func knownNames(index map[string]int) string {
	names := make([]string, 0, len(index))
	for n := range index {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 12 {
		return strings.Join(names[:12], ", ") + fmt.Sprintf(", and %d more", len(names)-12)
	}
	return strings.Join(names, ", ")
}

// findCycle returns one dependency cycle as a path that starts and ends at the same
// component, or nil. It visits components in document order, so the result is deterministic.
func findCycle(cs []Component, index map[string]int) []string {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]int, len(cs))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onStack
		stack = append(stack, cs[i].Name)
		for _, d := range cs[i].DependsOn {
			j := index[d]
			switch state[j] {
			case onStack:
				start := 0
				for k, n := range stack {
					if n == d {
						start = k
					}
				}
				cycle := append([]string{}, stack[start:]...)
				return append(cycle, d)
			case unvisited:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return nil
	}
	for i := range cs {
		if state[i] == unvisited {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// decodeObject decodes a JSON object keeping numbers exact (json.Number).
func decodeObject(raw []byte) (map[string]any, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", kindOf(v))
	}
	return m, nil
}

// decodeOrderedObject is decodeObject for Resolve: every mapping an *object (object.go). d is
// an ordered decoder kept for all of a bundle's values.
func decodeOrderedObject(d *fastDecoder, raw []byte) (*object, error) {
	v, err := d.decode(raw)
	if err != nil {
		if v, err = decodeValue(raw); err != nil {
			return nil, err
		}
		v = ordered(v)
	}
	switch t := v.(type) {
	case nil:
		return &object{}, nil
	case *object:
		return t, nil
	default:
		return nil, fmt.Errorf("got %s", kindOf(v))
	}
}

func decodeValue(raw []byte) (any, error) {
	if v, err := fastDecode(raw); err == nil {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any, *object:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}
