// Package diff says what the next rollout would change: it compares the live Applications the
// operator owns with the Applications the desired plan renders (shared/appspec.Build, the
// applier's builder), release by release.
package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Actions of a Change. Install, Upgrade, Apply and Remove are the step actions a rollout would
// take; Unchanged needs none; Foreign is an Application with the operator's labels but another
// runtime's UID, which the operator never touches.
const (
	Install   = string(v1alpha1.ActionInstall)
	Upgrade   = string(v1alpha1.ActionUpgrade)
	Apply     = string(v1alpha1.ActionApply)
	Remove    = string(v1alpha1.ActionRemove)
	Unchanged = "Unchanged"
	Foreign   = "Foreign"
)

// Options are what the desired Applications are rendered with.
type Options struct {
	// Settings are the installation values: the engine namespace, the project and the
	// registry repository. An empty Project or Repository is read from the live Applications.
	Settings appspec.Settings
	// Runtime is the live ClusterRuntime (its UID and spec.suspendEngine go into the manifests).
	RuntimeUID    string
	SuspendEngine bool
}

// Change is what the next rollout does to one release.
type Change struct {
	// Release is the release and Application name.
	Release string `json:"release"`
	// Action is Install, Upgrade, Apply, Remove, Unchanged or Foreign.
	Action string `json:"action"`
	// Fields are the paths that differ, such as spec.source.targetRevision.
	Fields []string `json:"fields,omitempty"`
	// Live and Desired are the compared parts of the Application (the operator's labels and
	// annotations, and the spec), absent when there is none.
	Live    map[string]any `json:"live,omitempty"`
	Desired map[string]any `json:"desired,omitempty"`
}

// Result is the comparison.
type Result struct {
	// Plan is the desired plan's digest ("" when the runtime is being deleted).
	Plan string `json:"plan"`
	// Source says where the desired plan came from.
	Source string `json:"source"`
	// EngineNamespace is where the Applications were read.
	EngineNamespace string `json:"engineNamespace"`
	// Changes, one per release, in the desired plan's order, then the removed ones.
	Changes []Change `json:"changes"`
}

// Changed counts the changes that are not Unchanged.
func (r *Result) Changed() int {
	n := 0
	for _, c := range r.Changes {
		if c.Action != Unchanged {
			n++
		}
	}
	return n
}

// Compute compares the live Applications with what desired (nil: nothing) renders.
func Compute(desired *plan.Plan, live []*unstructured.Unstructured, o Options) (*Result, error) {
	byName := map[string]*unstructured.Unstructured{}
	for _, u := range live {
		byName[u.GetName()] = u
	}
	s := o.Settings
	if s.Project == "" {
		s.Project = liveProject(live)
	}
	res := &Result{EngineNamespace: s.EngineNamespace}
	if desired != nil {
		res.Plan = desired.Digest()
		if s.Repository == "" {
			s.Repository = liveRepository(desired, byName)
		}
		if s.Repository == "" {
			return nil, fmt.Errorf("--registry-repository: the live Applications do not tell the registry repository (none renders a chart of this plan); pass it, such as --registry-repository registry.example.com/aicr")
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("render the desired applications: %w", err)
		}
	}
	seen := map[string]bool{}
	if desired != nil {
		for i := range desired.Releases {
			r := &desired.Releases[i]
			seen[r.Name] = true
			app, err := appspec.Build(s, appspec.Input{Runtime: v1alpha1.RuntimeName, RuntimeUID: o.RuntimeUID, PlanDigest: desired.Digest(),
				Release: r, SuspendEngine: o.SuspendEngine})
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(app)
			if err != nil {
				return nil, fmt.Errorf("encode application %s: %w", r.Name, err)
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				return nil, fmt.Errorf("encode application %s: %w", r.Name, err)
			}
			want := compared(obj)
			c := Change{Release: r.Name, Desired: want}
			u, ok := byName[r.Name]
			switch {
			case !ok:
				c.Action = Install
			case foreign(u, o.RuntimeUID):
				c.Action, c.Live = Foreign, compared(u.Object)
			default:
				c.Live = compared(u.Object)
				c.Fields = differing("", normalize(c.Live), normalize(want))
				c.Action = classify(c.Fields)
			}
			if c.Action == Unchanged {
				c.Live, c.Desired = nil, nil
			}
			res.Changes = append(res.Changes, c)
		}
	}
	for _, u := range live {
		if seen[u.GetName()] {
			continue
		}
		c := Change{Release: u.GetName(), Action: Remove, Live: compared(u.Object)}
		if foreign(u, o.RuntimeUID) {
			c.Action = Foreign
		}
		res.Changes = append(res.Changes, c)
	}
	return res, nil
}

// foreign says whether an Application carries the operator's labels but not this runtime's UID.
func foreign(u *unstructured.Unstructured, uid string) bool {
	return uid != "" && u.GetAnnotations()[v1alpha1.AnnotationRuntimeUID] != uid
}

// classify names the step a set of differing fields takes, by the planner's rule (plan.Action):
// a new chart, revision, values or destination (spec.source, spec.destination) is an Upgrade;
// anything else (dependencies, the gate flag, the sync policy) an Apply.
func classify(fields []string) string {
	content := slices.ContainsFunc(fields, func(f string) bool {
		return strings.HasPrefix(f, "spec.source") || strings.HasPrefix(f, "spec.destination")
	})
	if a := plan.Action(content, len(fields) > 0); a != "" {
		return string(a)
	}
	return Unchanged
}

// ownedAnnotations are the annotations the comparison looks at: those a plan decides. The plan
// digest, the step markers and the refresh handshake change with every rollout and are left out.
var ownedAnnotations = []string{
	v1alpha1.AnnotationRuntimeUID, v1alpha1.AnnotationReleaseID, v1alpha1.AnnotationDependsOn,
	v1alpha1.AnnotationReadinessGate, v1alpha1.AnnotationEngineSuspended,
}

// compared is the part of an Application a plan decides: its name, namespace, the operator's
// labels and annotations, and the spec.
func compared(obj map[string]any) map[string]any {
	meta, _ := obj["metadata"].(map[string]any)
	out := map[string]any{}
	m := map[string]any{"name": meta["name"], "namespace": meta["namespace"]}
	if l, ok := meta["labels"].(map[string]any); ok {
		keep := map[string]any{}
		for _, k := range []string{v1alpha1.LabelManagedBy, v1alpha1.LabelRuntime} {
			if v, ok := l[k]; ok {
				keep[k] = v
			}
		}
		m["labels"] = keep
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		keep := map[string]any{}
		for _, k := range ownedAnnotations {
			if v, ok := a[k]; ok {
				keep[k] = v
			}
		}
		m["annotations"] = keep
	}
	out["metadata"] = m
	if spec, ok := obj["spec"]; ok {
		out["spec"] = spec
	}
	return out
}

// number is a JSON number in canonical form, so 1, 1.0 and 1e0 compare equal.
type number string

// normalize re-reads a value from its JSON with numbers in canonical form.
func normalize(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return v
	}
	return canonical(out)
}

func canonical(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonical(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = canonical(e)
		}
		return x
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return number(r.RatString())
		}
		return number(x)
	}
	return v
}

// differing lists the paths where a and b differ: map keys descend, anything else compares whole.
func differing(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok || path == "spec.source.helm.valuesObject" {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{path}
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		p := k
		switch {
		case path == "metadata.annotations" || path == "metadata.labels":
			p = path + "[" + k + "]"
		case path != "":
			p = path + "." + k
		}
		out = append(out, differing(p, am[k], bm[k])...)
	}
	return out
}

// liveProject is the project of the live Applications, else the default.
func liveProject(live []*unstructured.Unstructured) string {
	for _, u := range live {
		if p, _, _ := unstructured.NestedString(u.Object, "spec", "project"); p != "" {
			return p
		}
	}
	return appspec.DefaultProject
}

// liveRepository reads registry.repository back from a live Application whose repoURL ends with
// the chart path the desired plan gives its release: repoURL is oci://<repository>/<chart path>.
func liveRepository(desired *plan.Plan, live map[string]*unstructured.Unstructured) string {
	for _, r := range desired.Releases {
		u, ok := live[r.Name]
		if !ok {
			continue
		}
		url, _, _ := unstructured.NestedString(u.Object, "spec", "source", "repoURL")
		if suffix := "/" + r.Chart.Path; strings.HasPrefix(url, "oci://") && strings.HasSuffix(url, suffix) {
			return strings.TrimSuffix(strings.TrimPrefix(url, "oci://"), suffix)
		}
	}
	return ""
}
