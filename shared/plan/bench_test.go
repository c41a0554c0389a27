package plan

import (
	"encoding/json"
	"fmt"
	"testing"
)

// layeredBundle generates a bundle of n components in layers of width: each component depends
// on up to three components of the layer below, and carries values with nesting, lists and
// numbers, like a chart's values.
func layeredBundle(tb testing.TB, n, width int) *Bundle {
	tb.Helper()
	b := &Bundle{APIVersion: BundleAPIVersion, Kind: BundleKind, Metadata: BundleMeta{Name: "bench", Version: "1"}}
	name := func(i int) string { return fmt.Sprintf("c%05d", i) }
	for i := range n {
		c := Component{
			Name:      name(i),
			Chart:     ChartRef{Path: "charts/" + name(i), Digest: digestA},
			Namespace: name(i),
			Values: json.RawMessage(fmt.Sprintf(`{"image":{"repository":"nvcr.io/nvidia/%s","tag":"v1.%d.0"},`+
				`"replicas":%d,"resources":{"limits":{"cpu":"500m","memory":"1Gi"},"requests":{"cpu":0.25}},`+
				`"nodeSelector":{},"tolerations":[],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}`, name(i), i, i%5)),
			Placement: &ComponentPlacement{Class: PlacementSystem, NodeSelectorPaths: []string{"nodeSelector"}, TolerationsPaths: []string{"tolerations"}},
		}
		if layer := i / width; layer > 0 {
			below := (layer - 1) * width
			for k := range 3 {
				c.DependsOn = append(c.DependsOn, name(below+(i+k*7)%width))
			}
			c.DependsOn = dedupe(c.DependsOn)
		}
		b.Components = append(b.Components, c)
	}
	if err := b.Validate(); err != nil {
		tb.Fatalf("generated bundle: %v", err)
	}
	return b
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// BenchmarkResolve measures Resolve (values decoding, placement, canonical encoding and the
// digest) for large generated stacks.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle := layeredBundle(b, n, 100)
			in := vectorInputs()
			in.Overrides = nil
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Resolve(bundle, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSteps measures the step derivation of a rollout that changes one release at the
// bottom of a generated stack (every release above it keeps its step-free state).
func BenchmarkSteps(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("releases=%d", n), func(b *testing.B) {
			bundle := layeredBundle(b, n, 100)
			from, err := Resolve(bundle, Inputs{})
			if err != nil {
				b.Fatal(err)
			}
			bundle.Components[0].Values = json.RawMessage(`{"image":{"tag":"v2"}}`)
			to, err := Resolve(bundle, Inputs{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if steps := Steps(from, to, StepOptions{}); len(steps) != 1 {
					b.Fatalf("%d steps, want 1", len(steps))
				}
			}
		})
	}
}

// BenchmarkParseBundle measures reading a large bundle document.
func BenchmarkParseBundle(b *testing.B) {
	doc, err := json.Marshal(layeredBundle(b, 1000, 100))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseBundle(doc); err != nil {
			b.Fatal(err)
		}
	}
}
