package app

import (
	"flag"
	"strings"
	"testing"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string // fragment; empty: valid
	}{
		"nothing to do":     {},
		"every Secret":      {args: []string{"--nats-auth-secret=a", "--nats-tls-secret=b", "--nats-tls-dns-names=n.ns.svc", "--webhook-tls-secret=c", "--webhook-tls-dns-names=w.ns.svc"}},
		"a bad namespace":   {args: []string{"--namespace=Aicr"}, want: `--namespace "Aicr": a namespace name is required`},
		"a bad secret name": {args: []string{"--nats-auth-secret=Bad_Name"}, want: `--nats-auth-secret "Bad_Name": a Secret name`},
		"a user that is no key": {args: []string{"--nats-auth-secret=a", "--nats-users=planner,bad user"},
			want: `--nats-users: "bad user" is not a user name`},
		"a user ending like a hash": {args: []string{"--nats-auth-secret=a", "--nats-users=x.bcrypt"}, want: `--nats-users: "x.bcrypt"`},
		"a certificate without names": {args: []string{"--webhook-tls-secret=c"},
			want: "--webhook-tls-dns-names: the certificate's DNS names are required"},
		"a short validity": {args: []string{"--webhook-tls-validity=1h"}, want: "--webhook-tls-validity 1h0m0s: use at least 24h"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMainExitCodes(t *testing.T) {
	var out strings.Builder
	if code := Main(t.Context(), []string{"--nats-tls-validity=1h"}, &out); code != 2 || !strings.HasPrefix(out.String(), "{") {
		t.Errorf("bad flags: exit %d, output %q; want 2 and a JSON line", code, out.String())
	}
	// The first line says what was built, so even a Job that fails at once tells which release it was.
	if first, _, _ := strings.Cut(out.String(), "\n"); !strings.Contains(first, `"version":"`+buildinfo.Get().Version+`"`) || !strings.Contains(first, `"message":"setup starting"`) {
		t.Errorf("first log line %q does not name the version", first)
	}
}
