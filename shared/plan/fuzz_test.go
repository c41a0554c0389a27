package plan

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// seedBundles adds every bundle document under testdata as a seed.
func seedBundles(f *testing.F) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed bundles in testdata: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatalf("read seed: %v", err)
		}
		f.Add(data)
	}
	f.Add([]byte(bundleDoc(component("a") + component("b", "dependsOn: [a]", "readinessGate: true"))))
	f.Add([]byte(bundleDoc(component("a", "values: {x: 1.50, y: [1, {z: null}], 'k.l': '<&>'}"))))
	f.Add([]byte(`{"apiVersion":"bundle.aicr.run/v1alpha1","kind":"Bundle","metadata":{"name":"s","version":"1"},"components":[]}`))
}

// checkPlan asserts the properties every resolved plan has: resolving again gives the same
// digest, and its canonical form decodes to the same digest.
func checkPlan(t *testing.T, b *Bundle, in Inputs) {
	t.Helper()
	p, err := Resolve(b, in)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("Resolve error is %T, want *plan.Error: %v", err, err)
		}
		_, err2 := Resolve(b, in)
		if err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("Resolve is not deterministic: %v, then %v", err, err2)
		}
		return
	}
	again, err := Resolve(b, in)
	if err != nil {
		t.Fatalf("second Resolve failed: %v", err)
	}
	if p.Digest() != again.Digest() {
		t.Fatalf("Resolve is not deterministic: %s, then %s", p.Digest(), again.Digest())
	}
	d, err := Decode(p.Canonical(), p.Digest())
	if err != nil {
		t.Fatalf("Decode(Canonical()): %v\n%s", err, p.Canonical())
	}
	if !bytes.Equal(d.Canonical(), p.Canonical()) {
		t.Fatalf("Decode(Canonical()) re-encodes differently:\n%s\n%s", p.Canonical(), d.Canonical())
	}
	if steps := Steps(p, d, StepOptions{}); len(steps) != 0 {
		t.Fatalf("a plan and its decoded copy differ by steps: %+v", steps)
	}
}

// FuzzParseBundle feeds arbitrary documents to ParseBundle: it never panics, every error is a
// *plan.Error, and an accepted bundle resolves deterministically to a plan whose canonical
// form decodes to the same digest.
func FuzzParseBundle(f *testing.F) {
	seedBundles(f)
	placement := vectorInputs().Placement
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ParseBundle error is %T, want *plan.Error: %v", err, err)
			}
			if pe.Reason == "" || pe.Message == "" {
				t.Fatalf("ParseBundle error without reason or message: %#v", pe)
			}
			return
		}
		checkPlan(t, b, Inputs{})
		checkPlan(t, b, Inputs{Placement: placement})
	})
}

// FuzzResolveOverrides feeds arbitrary overrides to Resolve over the test vector bundle: it
// never panics, errors are *plan.Error naming a spec.overrides field, and an accepted plan is
// deterministic and round-trips.
func FuzzResolveOverrides(f *testing.F) {
	f.Add("gpu-operator", "driver.version", []byte(`"580.82.07"`))
	f.Add("gpu-operator", "validator.ratio", []byte(`1.50`))
	f.Add("cert-manager", "labels[app.kubernetes.io/part-of]", []byte(`"x"`))
	f.Add("nodewright-customizations", "customizations[0]", []byte(`{"name":"a","n":1e400}`))
	f.Add("gpu-operator", "driver[upgradePolicy].gpuPodDeletion", []byte(`null`))
	f.Add("nfd", "a", []byte(`1`))
	f.Add("gpu-operator", "daemonsets.tolerations", []byte("[\"\\u2028<\"]"))
	b := mustParse(f, readTestdata(f, "vector-bundle.yaml"))
	f.Fuzz(func(t *testing.T, component, path string, value []byte) {
		in := vectorInputs()
		in.Overrides = append(in.Overrides, v1alpha1.Override{Component: component, Path: path, Value: rawJSON(string(value))})
		if _, err := Resolve(b, in); err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve error is %T, want *plan.Error: %v", err, err)
			}
			if !strings.HasPrefix(pe.Field, "spec.overrides[") {
				t.Fatalf("error field %q does not name an override", pe.Field)
			}
		}
		checkPlan(t, b, in)
	})
}
