package plantest

import (
	"bytes"
	"encoding/json"
	"testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Each shape's values are valid JSON objects of about their target size, the same on every
// call, different between releases, and hold the placement paths a system placement writes.
func TestGPUStackValuesSizes(t *testing.T) {
	for _, s := range GPUStackShapes() {
		t.Run(s.Name, func(t *testing.T) {
			a, b := GPUStackValues(s, 7), GPUStackValues(s, 7)
			if !bytes.Equal(a, b) {
				t.Fatal("two calls for the same release differ")
			}
			if bytes.Equal(a, GPUStackValues(s, 8)) {
				t.Fatal("releases 7 and 8 have the same values")
			}
			var m map[string]any
			if err := json.Unmarshal(a, &m); err != nil {
				t.Fatalf("values are not a JSON object: %v", err)
			}
			if lo, hi := (s.TargetKiB-1)*1024, (s.TargetKiB+2)*1024; len(a) < lo || len(a) > hi {
				t.Fatalf("values are %d bytes, want %d KiB (%d to %d)", len(a), s.TargetKiB, lo, hi)
			}
			for _, p := range []string{s.NodeSelectorPath, s.TolerationsPath} {
				if !hasPath(m, splitDots(p)) {
					t.Errorf("placement path %s is missing", p)
				}
			}
		})
	}
}

func hasPath(m map[string]any, path []string) bool {
	for i, p := range path {
		x, ok := m[p]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if m, ok = x.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// A GPU-stack bundle resolves into a plan whose releases carry the system placement, at about
// 13 KiB of values per release on average.
func TestGPUStackBundleResolves(t *testing.T) {
	b := GPUStackBundle(100, 10)
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	in := plan.Inputs{Placement: &v1alpha1.Placement{System: &v1alpha1.NodePlacement{NodeSelector: map[string]string{"node-role.kubernetes.io/system": "true"}}}}
	p, err := plan.Resolve(b, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Releases) != 100 {
		t.Fatalf("%d releases, want 100", len(p.Releases))
	}
	total := 0
	for _, c := range b.Components {
		total += len(c.Values)
	}
	if avg := total / len(b.Components) / 1024; avg < 10 || avg > 14 {
		t.Fatalf("average values size %d KiB, want about 13", avg)
	}
	raw, err := p.Releases[1].ValuesJSON() // gpu-operator: operator.nodeSelector
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"node-role.kubernetes.io/system":"true"`)) {
		t.Fatalf("release %s does not carry the placement", p.Releases[1].Name)
	}
}
