package service

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitIdentities(t *testing.T) {
	cases := map[string]struct {
		value   string
		want    []string
		wantErr string
	}{
		"as the chart passes them": {
			value: "system:serviceaccount:ops:aicr-operator-planner,system:serviceaccount:ops:aicr-operator-applier",
			want:  []string{"system:serviceaccount:ops:aicr-operator-planner", "system:serviceaccount:ops:aicr-operator-applier"},
		},
		"space around names and empty entries are dropped": {
			value: " alice , ,bob,",
			want:  []string{"alice", "bob"},
		},
		"nothing": {value: " , "},
		"a name with a space inside": {
			value:   "alice,bob smith",
			wantErr: `--operator-identities: "bob smith" contains white space`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SplitIdentities(tc.value)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("SplitIdentities(%q) error = %v, want %q", tc.value, err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("SplitIdentities(%q): %v", tc.value, err)
			case !slices.Equal(got, tc.want):
				t.Errorf("SplitIdentities(%q) = %q, want %q", tc.value, got, tc.want)
			}
		})
	}
}
