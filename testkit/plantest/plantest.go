// Package plantest generates bundles for tests and benchmarks of package plan and its users.
package plantest

import (
	"encoding/json"
	"fmt"

	"github.com/aicr-run/aicr-operator/shared/plan"
)

// ChartDigest is the chart digest every generated component pins.
const ChartDigest = "sha256:4c3db97306cbd0cad510ff970663aa0aa064d31816d84d5e6397aec4fdfb3d50"

// LayeredBundle is n components in layers of width: each component of a layer above the first
// depends on up to three components of the layer below, carries chart-like values (nesting,
// lists, numbers) and follows the system placement at nodeSelector and tolerations. The
// components are named c00000, c00001, ... in their own namespaces; the result is the same on
// every call and passes Bundle.Validate.
func LayeredBundle(n, width int) *plan.Bundle {
	b := &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: "bench", Version: "1"}}
	b.Components = make([]plan.Component, 0, n)
	for i := range n {
		c := plan.Component{
			Name:      Name(i),
			Chart:     plan.ChartRef{Path: "charts/" + Name(i), Digest: ChartDigest},
			Namespace: Name(i),
			Values: json.RawMessage(fmt.Sprintf(`{"image":{"repository":"nvcr.io/nvidia/%s","tag":"v1.%d.0"},`+
				`"replicas":%d,"resources":{"limits":{"cpu":"500m","memory":"1Gi"},"requests":{"cpu":0.25}},`+
				`"nodeSelector":{},"tolerations":[],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}`, Name(i), i, i%5)),
			Placement: &plan.ComponentPlacement{Class: plan.PlacementSystem, NodeSelectorPaths: []string{"nodeSelector"}, TolerationsPaths: []string{"tolerations"}},
		}
		if layer := i / width; layer > 0 {
			below := (layer - 1) * width
			for k := range 3 {
				d := Name(below + (i+k*7)%width)
				if !contains(c.DependsOn, d) {
					c.DependsOn = append(c.DependsOn, d)
				}
			}
		}
		b.Components = append(b.Components, c)
	}
	return b
}

// Name is the name of generated component i.
func Name(i int) string { return fmt.Sprintf("c%05d", i) }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
