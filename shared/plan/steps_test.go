package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// rel is a component for step tests: name, values version and dependencies.
type rel struct {
	name    string
	deps    []string
	version string // goes into values; a change is an Upgrade
	gate    bool
	digest  string // chart digest; digestA when empty
	ns      string // namespace; the name when empty
}

// planOf resolves a plan from rels without any runtime inputs.
func planOf(t *testing.T, rels ...rel) *Plan {
	t.Helper()
	b := &Bundle{APIVersion: BundleAPIVersion, Kind: BundleKind, Metadata: BundleMeta{Name: "s", Version: "1"}}
	for _, r := range rels {
		c := Component{Name: r.name, Chart: ChartRef{Path: "charts/" + r.name, Digest: digestA}, Namespace: r.name,
			DependsOn: r.deps, ReadinessGate: r.gate}
		if r.digest != "" {
			c.Chart.Digest = r.digest
		}
		if r.ns != "" {
			c.Namespace = r.ns
		}
		if r.version != "" {
			c.Values = json.RawMessage(fmt.Sprintf(`{"image":{"tag":%q}}`, r.version))
		}
		b.Components = append(b.Components, c)
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return mustResolve(t, b, Inputs{})
}

// step is a compact expected step; Index follows the position in the expected list.
type step struct {
	release string
	action  v1alpha1.StepAction
	deps    []string
	gate    bool
}

func wantSteps(ss ...step) []v1alpha1.Step {
	var out []v1alpha1.Step
	for i, s := range ss {
		out = append(out, v1alpha1.Step{Index: int32(i + 1), Release: s.release, Action: s.action, DependsOn: s.deps,
			ReadinessGate: s.gate, State: v1alpha1.StepPending})
	}
	return out
}

const (
	install = v1alpha1.ActionInstall
	upgrade = v1alpha1.ActionUpgrade
	apply   = v1alpha1.ActionApply
	remove  = v1alpha1.ActionRemove
)

func TestSteps(t *testing.T) {
	t.Parallel()
	diamond := []rel{{name: "a"}, {name: "b", deps: []string{"a"}}, {name: "c", deps: []string{"a"}}, {name: "d", deps: []string{"c", "b"}}}
	with := func(rs []rel, name string, edit func(*rel)) []rel {
		out := append([]rel(nil), rs...)
		for i := range out {
			if out[i].name == name {
				edit(&out[i])
			}
		}
		return out
	}
	without := func(rs []rel, names ...string) []rel {
		var out []rel
	next:
		for _, r := range rs {
			for _, n := range names {
				if r.name == n {
					continue next
				}
			}
			out = append(out, r)
		}
		return out
	}
	bump := func(r *rel) { r.version = "v2" }
	chain := []rel{{name: "a"}, {name: "b", deps: []string{"a"}}, {name: "c", deps: []string{"b"}}}
	gated := []rel{{name: "a"}, {name: "b", deps: []string{"a"}}, {name: "gate", deps: []string{"b"}, gate: true}, {name: "x"}}

	cases := map[string]struct {
		from, to []rel // nil plan when nil
		opts     StepOptions
		want     []v1alpha1.Step
	}{
		"a first install of a diamond goes level by level": {
			to: diamond,
			want: wantSteps(
				step{"a", install, nil, false},
				step{"b", install, []string{"a"}, false},
				step{"c", install, []string{"a"}, false},
				step{"d", install, []string{"b", "c"}, false}),
		},
		"releases without dependencies come first, in name order": {
			to: []rel{{name: "z"}, {name: "m", deps: []string{"z"}}, {name: "b"}, {name: "a", deps: []string{"b"}}},
			want: wantSteps(
				step{"b", install, nil, false},
				step{"z", install, nil, false},
				step{"a", install, []string{"b"}, false},
				step{"m", install, []string{"z"}, false}),
		},
		"an unchanged plan has no steps": {
			from: diamond, to: diamond,
		},
		"unchanged releases are skipped": {
			from: diamond, to: with(diamond, "c", bump),
			want: wantSteps(step{"c", upgrade, nil, false}),
		},
		"a dependency is found through an unchanged release": {
			from: chain, to: with(with(chain, "a", bump), "c", bump),
			want: wantSteps(
				step{"a", upgrade, nil, false},
				step{"c", upgrade, []string{"a"}, false}),
		},
		"a readiness gate is re-applied when something beneath it changes": {
			from: gated, to: with(gated, "a", bump),
			want: wantSteps(
				step{"a", upgrade, nil, false},
				step{"gate", apply, []string{"a"}, true}),
		},
		"a readiness gate is left alone when nothing beneath it changes": {
			from: gated, to: with(gated, "x", bump),
			want: wantSteps(step{"x", upgrade, nil, false}),
		},
		"a gate above a gate is re-applied after the gate beneath it": {
			from: append(gated, rel{name: "top", deps: []string{"gate"}, gate: true}),
			to:   append(with(gated, "b", bump), rel{name: "top", deps: []string{"gate"}, gate: true}),
			want: wantSteps(
				step{"b", upgrade, nil, false},
				step{"gate", apply, []string{"b"}, true},
				step{"top", apply, []string{"gate"}, true}),
		},
		"a new chart digest is an Upgrade": {
			from: chain, to: with(chain, "b", func(r *rel) { r.digest = digestB }),
			want: wantSteps(step{"b", upgrade, nil, false}),
		},
		"a new namespace is an Upgrade": {
			from: chain, to: with(chain, "b", func(r *rel) { r.ns = "elsewhere" }),
			want: wantSteps(step{"b", upgrade, nil, false}),
		},
		"new dependencies alone are an Apply": {
			from: chain, to: with(chain, "c", func(r *rel) { r.deps = []string{"a", "b"} }),
			want: wantSteps(step{"c", apply, nil, false}),
		},
		"becoming a readiness gate is an Apply": {
			from: chain, to: with(chain, "c", func(r *rel) { r.gate = true }),
			want: wantSteps(step{"c", apply, nil, true}),
		},
		"a new release beside unchanged ones is an Install that waits for nothing unchanged": {
			from: chain, to: append(chain, rel{name: "d", deps: []string{"c"}}),
			want: wantSteps(step{"d", install, nil, false}),
		},
		"removed releases go after the forward steps, dependents first": {
			from: append(chain, rel{name: "x"}), to: []rel{{name: "x", version: "v2"}},
			want: wantSteps(
				step{"x", upgrade, nil, false},
				step{"c", remove, nil, false},
				step{"b", remove, []string{"c"}, false},
				step{"a", remove, []string{"b", "c"}, false}),
		},
		"a removed release waits only for removed dependents": {
			from: diamond, to: without(diamond, "b", "d"),
			want: wantSteps(
				step{"d", remove, nil, false},
				step{"b", remove, []string{"d"}, false}),
		},
		"deleting the runtime removes everything in reverse dependency order": {
			from: diamond, to: nil,
			want: wantSteps(
				step{"d", remove, nil, false},
				step{"c", remove, []string{"d"}, false},
				step{"b", remove, []string{"d"}, false},
				step{"a", remove, []string{"b", "c", "d"}, false}),
		},
		"a removed readiness gate keeps its flag": {
			from: gated, to: without(gated, "gate"),
			want: wantSteps(step{"gate", remove, nil, true}),
		},
		"an engine policy move applies every release once, in dependency order": {
			from: gated, to: gated, opts: StepOptions{ApplyAll: true},
			want: wantSteps(
				step{"a", apply, nil, false},
				step{"x", apply, nil, false},
				step{"b", apply, []string{"a"}, false},
				step{"gate", apply, []string{"b"}, true}),
		},
		"ApplyAll keeps Upgrade for a changed release": {
			from: chain, to: with(chain, "b", bump), opts: StepOptions{ApplyAll: true},
			want: wantSteps(
				step{"a", apply, nil, false},
				step{"b", upgrade, []string{"a"}, false},
				step{"c", apply, []string{"b"}, false}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var from, to *Plan
			if tc.from != nil {
				from = planOf(t, tc.from...)
			}
			if tc.to != nil {
				to = planOf(t, tc.to...)
			}
			got := Steps(from, to, tc.opts)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Steps (-want +got):\n%s", diff)
			}
			again := Steps(from, to, tc.opts)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("Steps is not deterministic (-first +second):\n%s", diff)
			}
		})
	}
}

// TestStepsValuesKeyOrder proves that values equal as JSON are no change: a bundle that only
// reorders keys must not upgrade anything.
func TestStepsValuesKeyOrder(t *testing.T) {
	t.Parallel()
	mk := func(values string) *Plan {
		b := &Bundle{APIVersion: BundleAPIVersion, Kind: BundleKind, Metadata: BundleMeta{Name: "s", Version: "1"},
			Components: []Component{{Name: "a", Chart: ChartRef{Path: "charts/a", Digest: digestA}, Namespace: "a", Values: json.RawMessage(values)}}}
		return mustResolve(t, b, Inputs{})
	}
	from, to := mk(`{"x":1,"y":{"b":2,"a":3}}`), mk(`{"y":{"a":3,"b":2},"x":1}`)
	if from.Digest() != to.Digest() {
		t.Errorf("digests differ for reordered keys: %s != %s", from.Digest(), to.Digest())
	}
	if got := Steps(from, to, StepOptions{}); len(got) != 0 {
		t.Errorf("Steps = %+v, want none", got)
	}
}

// Compose seals a plan of releases taken from several plans; Force gives an unchanged release
// an Apply step.
func TestComposeAndForce(t *testing.T) {
	t.Parallel()
	b := &Bundle{APIVersion: BundleAPIVersion, Kind: BundleKind, Metadata: BundleMeta{Name: "s", Version: "1"}}
	for _, n := range []string{"a", "b"} {
		b.Components = append(b.Components, Component{Name: n, Namespace: n, Chart: ChartRef{Path: "charts/" + n, Digest: "sha256:" + strings.Repeat("1", 64)}, Values: []byte(`{"v":1}`)})
	}
	p, err := Resolve(b, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	composed, err := Compose(p.Bundle, []Release{p.Releases[1], p.Releases[0]})
	if err != nil {
		t.Fatal(err)
	}
	if composed.Digest() != p.Digest() || composed.Releases[0].Name != "a" {
		t.Errorf("composed of a plan's own releases: digest %s (plan %s), first %s", composed.Digest(), p.Digest(), composed.Releases[0].Name)
	}
	if _, err := Compose(p.Bundle, []Release{p.Releases[0], p.Releases[0]}); err == nil || !strings.Contains(err.Error(), "release a given twice") {
		t.Errorf("a release given twice: %v", err)
	}
	steps := Steps(composed, p, StepOptions{Force: map[string]bool{"b": true}})
	if len(steps) != 1 || steps[0].Release != "b" || steps[0].Action != v1alpha1.ActionApply {
		t.Errorf("steps %+v, want one Apply of b", steps)
	}
}
