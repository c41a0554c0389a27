package v1alpha1

import "testing"

func TestStepIDs(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		id      string
		rollout string
		index   int32
		ok      bool
	}{
		"a step":         {id: "r-abc-none/7", rollout: "r-abc-none", index: 7, ok: true},
		"a repair":       {id: "repair/0123456789ab/42"},
		"no index":       {id: "r-abc-none/"},
		"index zero":     {id: "r-abc-none/0"},
		"not a step ID":  {id: "plain"},
		"the last index": {id: "r-abc-none/2147483647", rollout: "r-abc-none", index: 2147483647, ok: true},
		// 2^32+1 is no step's index, not step 1's
		"an index past int32": {id: "r-abc-none/4294967297"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, i, ok := ParseStepID(tc.id)
			if r != tc.rollout || i != tc.index || ok != tc.ok {
				t.Errorf("ParseStepID(%q) = %q, %d, %v; want %q, %d, %v", tc.id, r, i, ok, tc.rollout, tc.index, tc.ok)
			}
		})
	}
	if id := StepID("r-abc-none", 7); id != "r-abc-none/7" {
		t.Errorf("StepID = %q, want r-abc-none/7", id)
	}
}
