package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// vectorDigest is the digest of testdata/vector-plan.json. It is pinned here, not read from a
// file, so a change to the canonical form cannot pass by regenerating the golden file alone:
// every plan stored in a cluster is named by this kind of digest.
const vectorDigest = "sha256:f7bf555e994826e3c903a34921056aee4c829088bf277a390a09a8a38e135387"

// vectorInputs are the runtime inputs of the test vector: overrides of a string, a number
// spelled with a trailing zero, a bracketed key and a list item, plus both placement classes.
func vectorInputs() Inputs {
	return Inputs{
		Overrides: []v1alpha1.Override{
			{Component: "gpu-operator", Path: "driver.version", Value: rawJSON(`"580.82.07"`)},
			{Component: "gpu-operator", Path: "validator.ratio", Value: rawJSON(`1.50`)},
			{Component: "cert-manager", Path: "labels[app.kubernetes.io/part-of]", Value: rawJSON(`"aicr-gpu"`)},
			{Component: "nodewright-customizations", Path: "customizations[0].enabled", Value: rawJSON(`false`)},
		},
		Placement: &v1alpha1.Placement{
			System: &v1alpha1.NodePlacement{
				NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/os": "linux"},
				Tolerations: []corev1.Toleration{
					{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				},
			},
			Accelerated: &v1alpha1.NodePlacement{
				NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"},
				Tolerations: []corev1.Toleration{
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				},
			},
		},
		ForbiddenNamespaces: []string{"aicr-system", "argocd"},
	}
}

func rawJSON(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	return data
}

func mustParse(t testing.TB, data []byte) *Bundle {
	t.Helper()
	b, err := ParseBundle(data)
	if err != nil {
		t.Fatalf("ParseBundle: %v", err)
	}
	return b
}

func mustResolve(t testing.TB, b *Bundle, in Inputs) *Plan {
	t.Helper()
	p, err := Resolve(b, in)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return p
}

// TestPlanDigestVector pins the canonical JSON and the digest of a fixed bundle and inputs. The
// same bundle and inputs must give these exact bytes on any machine and any Go version: the
// planner, the admission webhook and the CLI all compute this digest, and plans are stored
// under it.
func TestPlanDigestVector(t *testing.T) {
	b := mustParse(t, readTestdata(t, "vector-bundle.yaml"))
	p := mustResolve(t, b, vectorInputs())

	golden := filepath.Join("testdata", "vector-plan.json")
	if *update {
		if err := os.WriteFile(golden, append(append([]byte{}, p.Canonical()...), '\n'), 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		t.Logf("wrote %s; digest %s", golden, p.Digest())
	}
	want := bytes.TrimSuffix(readTestdata(t, "vector-plan.json"), []byte("\n"))
	if diff := cmp.Diff(string(want), string(p.Canonical())); diff != "" {
		t.Errorf("canonical JSON differs from %s (-want +got):\n%s", golden, diff)
	}
	if p.Digest() != vectorDigest {
		t.Errorf("Digest() = %s, want the pinned %s", p.Digest(), vectorDigest)
	}
	sum := sha256.Sum256(want)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != vectorDigest {
		t.Errorf("sha256 of %s = %s, want the pinned %s", golden, got, vectorDigest)
	}

	t.Run("repeated resolves give the same bytes", func(t *testing.T) {
		// Go randomises map iteration; a canonical form that leaked map order would differ
		// between runs within one process already.
		for range 20 {
			again := mustResolve(t, mustParse(t, readTestdata(t, "vector-bundle.yaml")), vectorInputs())
			if !bytes.Equal(again.Canonical(), p.Canonical()) {
				t.Fatalf("second Resolve differs:\n%s", cmp.Diff(string(p.Canonical()), string(again.Canonical())))
			}
		}
	})
	t.Run("numbers keep their spelling", func(t *testing.T) {
		for _, s := range []string{`"ratio":1.50`, `"big":12345678901234567`, `"drainTimeoutSeconds":300`} {
			if !bytes.Contains(p.Canonical(), []byte(s)) {
				t.Errorf("canonical JSON lacks %s", s)
			}
		}
	})
	t.Run("HTML is not escaped", func(t *testing.T) {
		if !bytes.Contains(p.Canonical(), []byte(`"annotation":"a<b>&c"`)) {
			t.Errorf("canonical JSON escapes HTML: want \"a<b>&c\" as written")
		}
	})
	t.Run("Decode of the golden file gives the same plan", func(t *testing.T) {
		d, err := Decode(want, vectorDigest)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !bytes.Equal(d.Canonical(), want) {
			t.Errorf("Decode then Canonical differs:\n%s", cmp.Diff(string(want), string(d.Canonical())))
		}
	})
}
