package kubeaccess

import (
	"slices"
	"testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// TestNeedsAreNarrow proves every declared need names its calls and grants no wildcard: a
// declaration of "*" would let the chart grant anything and still pass the RBAC test.
func TestNeedsAreNarrow(t *testing.T) {
	scopes := []Scope{Cluster, Operator, Engine, Bundles}
	for _, b := range append(v1alpha1.Binaries(), Setup) {
		needs := Needs(b)
		if len(needs) == 0 {
			t.Errorf("%s declares no needs", b)
		}
		for _, n := range needs {
			if n.Why == "" || len(n.Verbs) == 0 || n.Resource == "" {
				t.Errorf("%s: need %+v names no call, verb or resource", b, n)
			}
			if n.Resource == "*" || n.Group == "*" || slices.Contains(n.Verbs, "*") || slices.Contains(n.Names, "*") {
				t.Errorf("%s: need %+v has a wildcard", b, n)
			}
			if !slices.Contains(scopes, n.Scope) {
				t.Errorf("%s: need %+v has no known scope", b, n)
			}
			if n.AuthMode != "" && n.AuthMode != "aws" && n.AuthMode != "static" {
				t.Errorf("%s: need %+v has an unknown auth mode", b, n)
			}
		}
	}
	if Needs("auditor") != nil {
		t.Error("an unknown binary has needs")
	}
}
