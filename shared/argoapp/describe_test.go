package argoapp

import "testing"

func TestOperationInitiatorDescribe(t *testing.T) {
	cases := map[string]struct {
		in   OperationInitiator
		want string
	}{
		"a person or the operator":    {OperationInitiator{Username: "aicr-operator"}, "aicr-operator"},
		"Argo CD's automated sync":    {OperationInitiator{Automated: true}, "Argo CD's automated sync"},
		"a user name on an automated": {OperationInitiator{Username: "admin", Automated: true}, "admin (automated)"},
		"nothing recorded":            {OperationInitiator{}, "an unknown initiator"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.Describe(); got != tc.want {
				t.Errorf("Describe() = %q, want %q", got, tc.want)
			}
		})
	}
}
