package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// PlanAPIVersion identifies the canonical plan format. Changing the format changes every digest.
const PlanAPIVersion = "plan.aicr.run/v1alpha1"

// MaxPlanBytes bounds a plan's canonical form, so that it fits a ConfigMap (1 MiB) with room
// for metadata.
const MaxPlanBytes = 900 << 10

// DefaultForbiddenNamespaces may never hold a component.
var DefaultForbiddenNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "default"}

// Plan is a resolved bundle: every release with its final values and dependencies. Build one
// with Resolve or Decode; its Digest names it everywhere.
type Plan struct {
	// APIVersion is PlanAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Bundle names the bundle the plan came from.
	Bundle BundleMeta `json:"bundle"`
	// Releases sorted by name.
	Releases []Release `json:"releases"`

	canonical []byte
	digest    string
	byName    map[string]int
}

// Release is one component with its final values.
type Release struct {
	// Name is the release and Application name.
	Name string `json:"name"`
	// Namespace is the destination namespace.
	Namespace string `json:"namespace"`
	// Chart is the chart path and digest.
	Chart ChartRef `json:"chart"`
	// DependsOn is sorted.
	DependsOn []string `json:"dependsOn,omitempty"`
	// ReadinessGate marks a readiness release.
	ReadinessGate bool `json:"readinessGate,omitempty"`
	// Values are the final Helm values (bundle values, then placement, then overrides) of a
	// release not yet sealed into a plan; Resolve builds them in a form of its own (tree). A
	// sealed plan (from Resolve, Decode or Compose) keeps them only as canonical JSON and
	// Values is nil: read them with ValuesJSON. Decoded, a chart's values
	// take about seven times their JSON's size, and every service keeps plans in a cache
	// (a GPU-stack plan of 40 releases: 3.8 MB decoded, 0.5 MB as JSON).
	Values map[string]any `json:"values"`

	// values is the canonical JSON of Values once the plan is sealed: a slice of the plan's
	// canonical form, never modified.
	values []byte
	// tree holds the values while Resolve builds the plan, in place of Values (object.go);
	// sealing clears it.
	tree *object
}

// Inputs are the runtime's contributions to a plan.
type Inputs struct {
	// Overrides from the ClusterRuntime spec.
	Overrides []v1alpha1.Override
	// Placement from the ClusterRuntime spec.
	Placement *v1alpha1.Placement
	// ForbiddenNamespaces may not hold a component, in addition to
	// DefaultForbiddenNamespaces (the operator and Argo CD namespaces, typically).
	ForbiddenNamespaces []string
}

// Resolve builds the plan for a validated bundle and the runtime's inputs. Errors are *Error
// values whose Field is a ClusterRuntime path (spec.overrides[i]..., spec.placement...) or a
// bundle path (components[i]...). Whether the plan fits a ConfigMap is CheckSize's question.
//
// With several problems, the one reported is the first of: a component's namespace or values
// (in component order), the runtime's placement, a component's placement paths (in component
// order), then the overrides (in their order).
func Resolve(b *Bundle, in Inputs) (*Plan, error) {
	forbidden := map[string]bool{}
	for _, ns := range append(append([]string{}, DefaultForbiddenNamespaces...), in.ForbiddenNamespaces...) {
		forbidden[ns] = true
	}
	releases := make([]Release, len(b.Components))
	edges := 0
	for i := range b.Components {
		edges += len(b.Components[i].DependsOn)
	}
	allDeps := make([]string, 0, edges) // one backing array for every release's DependsOn
	sizeHint := 0
	dec := fastDecoder{ordered: true} // one arena for every component's values
	for i := range b.Components {
		c := &b.Components[i]
		if forbidden[c.Namespace] {
			return nil, errorf(v1alpha1.ReasonNamespaceNotAllowed, fmt.Sprintf("components[%d].namespace", i),
				"namespace %q is not allowed for a component (reserved: %s); use a namespace of the component's own", c.Namespace, strings.Join(sortedKeys(forbidden), ", "))
		}
		var values *object
		if len(bytes.TrimSpace(c.Values)) > 0 {
			v, err := decodeOrderedObject(&dec, c.Values)
			if err != nil {
				return nil, bundleErr(fmt.Sprintf("components[%d].values", i), "values must be a mapping of Helm values: %v", err)
			}
			values = v
		} else {
			values = &object{}
		}
		start := len(allDeps)
		allDeps = append(allDeps, c.DependsOn...)
		deps := allDeps[start:len(allDeps):len(allDeps)]
		if len(deps) == 0 {
			deps = nil
		}
		sort.Strings(deps)
		releases[i] = Release{Name: c.Name, Namespace: c.Namespace, Chart: c.Chart, DependsOn: deps, ReadinessGate: c.ReadinessGate, tree: values}
		sizeHint += canonicalSizeHint(c)
	}
	placer, err := newPlacer(in.Placement)
	if err != nil {
		return nil, err
	}
	for i := range b.Components {
		added, err := placer.place(i, &b.Components[i], releases[i].tree)
		if err != nil {
			return nil, err
		}
		sizeHint += added
	}
	slices.SortFunc(releases, func(a, b Release) int { return strings.Compare(a.Name, b.Name) })
	p := &Plan{APIVersion: PlanAPIVersion, Bundle: b.Metadata, Releases: releases}
	p.index() // overrides find their release through the plan's own index
	if err := applyOverrides(b, p.Releases, p.byName, in.Overrides); err != nil {
		return nil, err
	}
	if err := p.seal(sizeHint + 128); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckSize refuses, with ContentTooLarge naming its size and the limit, a plan whose canonical
// form does not fit a plan ConfigMap (MaxPlanBytes). Such a plan can never be stored, so the
// planner treats it as a spec that does not resolve. Resolve itself does not check: benchmarks
// resolve plans larger than that.
func (p *Plan) CheckSize() error {
	if len(p.canonical) > MaxPlanBytes {
		return errorf(v1alpha1.ReasonContentTooLarge, "", "the plan is %d bytes; a plan ConfigMap holds at most %d (reduce values or components)", len(p.canonical), MaxPlanBytes)
	}
	return nil
}

// canonicalSizeHint is about the size of a component's release in the canonical form (before
// placement and overrides): its strings and values as written and the JSON around them.
// Allocating the canonical buffer once, at the right size, saves copying a large plan's buffer
// as it grows.
func canonicalSizeHint(c *Component) int {
	const fixed = len(`{"name":"","namespace":"","chart":{"path":"","digest":""},"dependsOn":[],"readinessGate":true,"values":},`)
	n := fixed + len(c.Name) + len(c.Namespace) + len(c.Chart.Path) + len(c.Chart.Digest) + len(c.Values)
	for _, d := range c.DependsOn {
		n += len(d) + 3
	}
	return n
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// placer writes the runtime's placement into the values of the components that declare a
// placement class.
type placer struct {
	// rendered holds, by class, the node selector and the tolerations as values, and the size
	// of their JSON; a class the runtime does not place is absent.
	rendered map[string]renderedPlacement
	// paths holds each placement path parsed once: every component of a stack tends to
	// declare the same few.
	paths map[string][]Segment
}

type renderedPlacement struct {
	selector, tolerations         any
	selectorSize, tolerationsSize int
}

// newPlacer validates and renders the runtime's placement (nil: nothing to place).
func newPlacer(pl *v1alpha1.Placement) (*placer, error) {
	p := &placer{rendered: map[string]renderedPlacement{}, paths: map[string][]Segment{}}
	if pl == nil {
		return p, nil
	}
	classes := map[string]*v1alpha1.NodePlacement{PlacementSystem: pl.System, PlacementAccelerated: pl.Accelerated}
	// A fixed order, so that with both classes invalid the same error is reported every time.
	for _, class := range []string{PlacementSystem, PlacementAccelerated} {
		np := classes[class]
		if np == nil {
			continue
		}
		sel, tol, err := renderPlacement("spec.placement."+class, np)
		if err != nil {
			return nil, err
		}
		selJSON, err := appendValue(nil, sel)
		if err != nil {
			return nil, fmt.Errorf("encode spec.placement.%s: %w", class, err)
		}
		tolJSON, err := appendValue(nil, tol)
		if err != nil {
			return nil, fmt.Errorf("encode spec.placement.%s: %w", class, err)
		}
		p.rendered[class] = renderedPlacement{selector: ordered(sel), tolerations: ordered(tol), selectorSize: len(selJSON), tolerationsSize: len(tolJSON)}
	}
	return p, nil
}

// place writes the placement of component i (c) into its values, and returns about how many
// bytes that adds to the canonical form.
func (p *placer) place(i int, c *Component, values *object) (int, error) {
	if c.Placement == nil {
		return 0, nil
	}
	r, ok := p.rendered[c.Placement.Class]
	if !ok {
		return 0, nil
	}
	size := 0
	for j, path := range c.Placement.NodeSelectorPaths {
		if err := setCreating(values, p.parse(path), ordered(r.selector)); err != nil {
			return 0, errorf(v1alpha1.ReasonInvalidPlacement, fmt.Sprintf("components[%d].placement.nodeSelectorPaths[%d]", i, j), "%v", err)
		}
		size += len(path) + r.selectorSize + 4
	}
	for j, path := range c.Placement.TolerationsPaths {
		if err := setCreating(values, p.parse(path), ordered(r.tolerations)); err != nil {
			return 0, errorf(v1alpha1.ReasonInvalidPlacement, fmt.Sprintf("components[%d].placement.tolerationsPaths[%d]", i, j), "%v", err)
		}
		size += len(path) + r.tolerationsSize + 4
	}
	return size, nil
}

func (p *placer) parse(path string) []Segment {
	segs, ok := p.paths[path]
	if !ok {
		segs, _ = ParsePath(path) // validated by Bundle.Validate
		p.paths[path] = segs
	}
	return segs
}

// renderPlacement validates a NodePlacement and renders it as values.
func renderPlacement(field string, np *v1alpha1.NodePlacement) (map[string]any, []any, error) {
	keys := make([]string, 0, len(np.NodeSelector))
	for k := range np.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sel := make(map[string]any, len(keys))
	for _, k := range keys {
		v := np.NodeSelector[k]
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, nil, errorf(v1alpha1.ReasonInvalidPlacement, fmt.Sprintf("%s.nodeSelector[%s]", field, k),
				"%q is not a valid label key: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, nil, errorf(v1alpha1.ReasonInvalidPlacement, fmt.Sprintf("%s.nodeSelector[%s]", field, k),
				"%q is not a valid label value: %s", v, strings.Join(errs, "; "))
		}
		sel[k] = v
	}
	tols := make([]any, 0, len(np.Tolerations))
	for i, t := range np.Tolerations {
		tf := fmt.Sprintf("%s.tolerations[%d]", field, i)
		if err := validateToleration(tf, t); err != nil {
			return nil, nil, err
		}
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, nil, errorf(v1alpha1.ReasonInvalidPlacement, tf, "cannot render toleration: %v", err)
		}
		v, err := decodeValue(raw)
		if err != nil {
			return nil, nil, errorf(v1alpha1.ReasonInvalidPlacement, tf, "cannot render toleration: %v", err)
		}
		tols = append(tols, v)
	}
	return sel, tols, nil
}

func validateToleration(field string, t corev1.Toleration) error {
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			return errorf(v1alpha1.ReasonInvalidPlacement, field+".operator", "operator Equal needs a key; use operator Exists to tolerate every taint")
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return errorf(v1alpha1.ReasonInvalidPlacement, field+".value", "operator Exists takes no value; remove it or use operator Equal")
		}
	default:
		return errorf(v1alpha1.ReasonInvalidPlacement, field+".operator", "%q is not a toleration operator; use Equal or Exists", t.Operator)
	}
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return errorf(v1alpha1.ReasonInvalidPlacement, field+".key", "%q is not a valid taint key: %s", t.Key, strings.Join(errs, "; "))
		}
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return errorf(v1alpha1.ReasonInvalidPlacement, field+".effect", "%q is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		return errorf(v1alpha1.ReasonInvalidPlacement, field+".tolerationSeconds", "tolerationSeconds applies only to effect NoExecute")
	}
	return nil
}

func applyOverrides(b *Bundle, releases []Release, byName map[string]int, overrides []v1alpha1.Override) error {
	seen := map[string]int{}
	for i, o := range overrides {
		f := fmt.Sprintf("spec.overrides[%d]", i)
		idx, ok := byName[o.Component]
		if !ok {
			return errorf(v1alpha1.ReasonInvalidOverride, f+".component", "no component %q in bundle %s %s (components: %s)",
				o.Component, b.Metadata.Name, b.Metadata.Version, knownNames(byName))
		}
		segs, err := ParsePath(o.Path)
		if err != nil {
			return errorf(v1alpha1.ReasonInvalidOverride, f+".path", "%v", err)
		}
		key := o.Component + "\x00" + renderPath(segs)
		if j, dup := seen[key]; dup {
			return errorf(v1alpha1.ReasonInvalidOverride, f+".path", "%s %s is already overridden by spec.overrides[%d]; keep one", o.Component, o.Path, j)
		}
		seen[key] = i
		if len(bytes.TrimSpace(o.Value.Raw)) == 0 {
			return errorf(v1alpha1.ReasonInvalidOverride, f+".value", "a value is required (use null to clear a value)")
		}
		v, err := decodeValue(o.Value.Raw)
		if err != nil {
			return errorf(v1alpha1.ReasonInvalidOverride, f+".value", "not a JSON value: %v", err)
		}
		if err := replaceExisting(releases[idx].tree, segs, ordered(v)); err != nil {
			return errorf(v1alpha1.ReasonOverridePathUnknown, f+".path", "component %s: %v; an override may only change a value the bundle declares", o.Component, err)
		}
	}
	return nil
}

// index builds the name index of the releases.
func (p *Plan) index() {
	p.byName = make(map[string]int, len(p.Releases))
	for i, r := range p.Releases {
		p.byName[r.Name] = i
	}
}

// seal computes the canonical form and the digest. sizeHint is the expected size of the
// canonical form (0 when unknown): growing a large plan's buffer step by step copied it over
// and over.
func (p *Plan) seal(sizeHint int) error {
	canonical, spans, err := p.appendCanonical(make([]byte, 0, sizeHint))
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	p.canonical = canonical
	for i := range p.Releases {
		s := spans[i]
		p.Releases[i].values, p.Releases[i].Values, p.Releases[i].tree = canonical[s[0]:s[1]:s[1]], nil, nil
	}
	sum := sha256.Sum256(p.canonical)
	p.digest = "sha256:" + hex.EncodeToString(sum[:])
	return nil
}

// Digest is the plan's desiredStateDigest: "sha256:" and the hex SHA-256 of Canonical().
func (p *Plan) Digest() string { return p.digest }

// Canonical is the plan's canonical JSON: struct fields in declaration order, mapping keys
// sorted, no HTML escaping, numbers as written in the input. Do not modify it.
func (p *Plan) Canonical() []byte { return p.canonical }

// Release returns the named release.
func (p *Plan) Release(name string) (*Release, bool) {
	if p == nil {
		return nil, false
	}
	i, ok := p.byName[name]
	if !ok {
		return nil, false
	}
	return &p.Releases[i], true
}

// Detached returns a copy of r, a release of a sealed plan, that keeps none of its plan's memory
// alive, for a user that holds one release far longer than the plan (readiness keeps the release
// of each watched Application). Its values JSON is like when like holds the same bytes (the
// Application's own values, already in memory), a copy of r's otherwise; like must never be
// modified after. A release that is not sealed is returned as it is.
func (r *Release) Detached(like []byte) Release {
	d := *r
	if r.values == nil {
		return d
	}
	d.DependsOn = slices.Clone(r.DependsOn)
	if bytes.Equal(like, r.values) {
		d.values = like
	} else {
		d.values = bytes.Clone(r.values)
	}
	return d
}

// DetachedWith returns a copy of r that keeps none of its plan's memory alive and whose values
// JSON is values, a stand-in the caller holds in place of r's (readiness keeps a digest of
// them): for a user that compares releases and renders them for comparison, never for a write.
// values must never be modified after.
func (r *Release) DetachedWith(values []byte) Release {
	d := *r
	d.DependsOn = slices.Clone(r.DependsOn)
	d.Values, d.tree, d.values = nil, nil, values
	return d
}

// Decode reads a plan from its canonical JSON and checks it against the expected digest
// (skipped when want is empty).
func Decode(data []byte, want string) (*Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	if p.APIVersion != PlanAPIVersion {
		return nil, fmt.Errorf("decode plan: apiVersion %q is not supported; expected %q", p.APIVersion, PlanAPIVersion)
	}
	for i := range p.Releases {
		if p.Releases[i].Values == nil {
			p.Releases[i].Values = map[string]any{}
		}
	}
	p.index()
	if err := p.seal(len(data)); err != nil {
		return nil, err
	}
	if want != "" && p.digest != want {
		return nil, fmt.Errorf("decode plan: content digest %s does not match %s", p.digest, want)
	}
	return &p, nil
}

// Equal reports whether two releases are the same: every field, and the same values (as
// canonical JSON, sealed or not). go-cmp uses it.
func (r Release) Equal(o Release) bool {
	if r.Name != o.Name || r.Namespace != o.Namespace || r.Chart != o.Chart || !sameGraph(&r, &o) {
		return false
	}
	a, errA := r.ValuesJSON()
	b, errB := o.ValuesJSON()
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// ValuesJSON returns the release's final values as JSON (keys sorted). For a release of a
// sealed plan it is the plan's canonical bytes: do not modify them.
func (r *Release) ValuesJSON() ([]byte, error) {
	if r.values != nil {
		return r.values, nil
	}
	if r.Values == nil {
		return []byte("null"), nil
	}
	out, err := appendObject(nil, r.Values)
	if err != nil {
		return nil, fmt.Errorf("encode values of %s: %w", r.Name, err)
	}
	return out, nil
}

// sameContent reports whether release ai of a and release bi of b render the same Application
// source and destination.
func sameContent(a *Plan, ai int, b *Plan, bi int) bool {
	ar, br := &a.Releases[ai], &b.Releases[bi]
	if ar.Namespace != br.Namespace || ar.Chart != br.Chart {
		return false
	}
	av, err1 := ar.ValuesJSON()
	bv, err2 := br.ValuesJSON()
	return err1 == nil && err2 == nil && bytes.Equal(av, bv)
}

func sameGraph(a, b *Release) bool {
	if a.ReadinessGate != b.ReadinessGate || len(a.DependsOn) != len(b.DependsOn) {
		return false
	}
	for i := range a.DependsOn {
		if a.DependsOn[i] != b.DependsOn[i] {
			return false
		}
	}
	return true
}
