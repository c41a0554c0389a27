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

// TestValidateDriftFlags proves the drift check's flags are refused with the flag named and
// what is accepted, and accepted within bounds.
func TestValidateDriftFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // "" for valid
	}{
		"the defaults with a repository": {args: []string{"--registry-repository=registry.example.com/aicr"}},
		"no repository":                  {args: nil, want: "--registry-repository is required"},
		"a repository with a scheme":     {args: []string{"--registry-repository=https://r.example.com/aicr"}, want: "only oci:// is supported"},
		"a resync below a second":        {args: []string{"--registry-repository=r.example.com/a", "--drift-resync=500ms"}, want: "--drift-resync 500ms: use 1s to 10m0s"},
		"a resync above ten minutes":     {args: []string{"--registry-repository=r.example.com/a", "--drift-resync=11m"}, want: "--drift-resync 11m0s: use 1s to 10m0s"},
		"a resync of a minute":           {args: []string{"--registry-repository=r.example.com/a", "--drift-resync=1m"}},
		"an empty engine project":        {args: []string{"--registry-repository=r.example.com/a", "--engine-project="}, want: "engine project is required"},
		"a CA file that is not there":    {args: []string{"--registry-repository=r.example.com/a", "--registry-ca-file=/nonexistent/ca.crt"}, want: "--registry-ca-file: open /nonexistent/ca.crt"},
		"a CA file with no certificate":  {args: []string{"--registry-repository=r.example.com/a", "--registry-ca-file=app_test.go"}, want: "--registry-ca-file app_test.go: no PEM certificate in it"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			var o Options
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
