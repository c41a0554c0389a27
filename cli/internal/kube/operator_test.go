package kube

import "testing"

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/aicr-run/aicr-operator/planner:0.1.0":               "0.1.0",
		"registry:5000/aicr/planner":                                 "",
		"registry:5000/aicr/planner:v2":                              "v2",
		"ghcr.io/aicr-run/aicr-operator/planner:0.1.0@sha256:abcdef": "0.1.0",
		"planner@sha256:abcdef":                                      "",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}
