package app

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestDefaultKubeRateLimits(t *testing.T) {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v %d %s %s", o.KubeQPS, o.KubeBurst, fs.Lookup("kube-qps").DefValue, fs.Lookup("kube-burst").DefValue)
	if want := "1000 2000 1000 2000"; got != want {
		t.Errorf("kube rate limits = %q, want %q", got, want)
	}
	if err := fs.Parse([]string{"--kube-qps=20", "--kube-burst=30"}); err != nil {
		t.Fatal(err)
	}
	if o.KubeQPS != 20 || o.KubeBurst != 30 {
		t.Errorf("flags did not override the defaults: %v %d", o.KubeQPS, o.KubeBurst)
	}
}

// TestIdentities proves the default operator identities are the service accounts the chart
// gives the five binaries (the chart's aicr-operator-<binary>), and that the flag replaces them.
func TestIdentities(t *testing.T) {
	cases := map[string]struct {
		args []string
		want []string
	}{
		"default: aicr-operator and the chart's five service accounts in --namespace": {
			args: []string{"--namespace=ops"},
			want: []string{
				"aicr-operator",
				"system:serviceaccount:ops:aicr-operator-planner",
				"system:serviceaccount:ops:aicr-operator-applier",
				"system:serviceaccount:ops:aicr-operator-readiness",
				"system:serviceaccount:ops:aicr-operator-credrefresher",
				"system:serviceaccount:ops:aicr-operator-admission",
			},
		},
		"--operator-identities replaces the default": {
			args: []string{"--namespace=ops", "--operator-identities=alice,system:serviceaccount:ops:bot"},
			want: []string{"alice", "system:serviceaccount:ops:bot"},
		},
		"space after a comma is dropped": {
			args: []string{"--operator-identities=alice, bob"},
			want: []string{"alice", "bob"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			var o Options
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := o.Identities(); !slices.Equal(got, tc.want) {
				t.Errorf("Identities() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestValidateIdentities proves a user name with white space inside is refused, quoted.
func TestValidateIdentities(t *testing.T) {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--operator-identities=alice,bob smith"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), `--operator-identities: "bob smith" contains white space`) {
		t.Errorf("Validate() = %v, want the name with white space quoted", err)
	}
}
