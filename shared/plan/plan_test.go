package plan

import (
	"bytes"
	"testing"
)

// TestDetachedKeepsNothingOfThePlan: a detached release gives the same values JSON and is the
// same release, its values are the caller's bytes when they are the same, and a copy when not:
// never a slice of the plan's canonical form.
func TestDetachedKeepsNothingOfThePlan(t *testing.T) {
	b := mustParse(t, []byte(bundleDoc(component("a", "values: {replicas: 2, image: {tag: v1}}")+component("b", "dependsOn: [a]"))))
	p := mustResolve(t, b, Inputs{})
	r, ok := p.Release("b")
	if !ok {
		t.Fatal("release b missing")
	}
	planValues, err := r.ValuesJSON()
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := p.Release("a")
	aValues, _ := ra.ValuesJSON()

	live := bytes.Clone(aValues) // the Application's own values, equal to the plan's
	same := ra.Detached(live)
	got, err := same.ValuesJSON()
	if err != nil || &got[0] != &live[0] {
		t.Errorf("values of the release detached with equal bytes: %s (%v), want the caller's bytes", got, err)
	}
	if !same.Equal(*ra) || same.Values != nil {
		t.Errorf("detached %+v, want release a without decoded values", same)
	}

	other := r.Detached([]byte(`{"replicas":3}`))
	got, err = other.ValuesJSON()
	if err != nil || !bytes.Equal(got, planValues) || &got[0] == &planValues[0] {
		t.Errorf("values of the release detached with other bytes: %s (%v), want a copy of %s", got, err, planValues)
	}
	if !other.Equal(*r) || len(other.DependsOn) != 1 || &other.DependsOn[0] == &r.DependsOn[0] {
		t.Errorf("detached %+v, want release b with a copy of its dependencies", other)
	}
}
