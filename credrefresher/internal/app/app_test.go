package app

import (
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr []string
	}{
		"aws with a repository":      {args: []string{"--registry-repository", "123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr"}},
		"static needs no repository": {args: []string{"--registry-auth", "static"}},
		"aws without a repository": {
			wantErr: []string{"--registry-repository is required with --registry-auth aws"},
		},
		"an unknown mode": {
			args:    []string{"--registry-auth", "gcp"},
			wantErr: []string{`--registry-auth "gcp": use aws or static`},
		},
		"a refresh interval as long as the token's life": {
			args:    []string{"--registry-repository", "r.example.com/a", "--refresh-interval", "12h"},
			wantErr: []string{"--refresh-interval 12h0m0s: use a duration above 0 and below 12h"},
		},
		"a repository with another scheme": {
			args:    []string{"--registry-repository", "https://r.example.com/a"},
			wantErr: []string{`--registry-repository "https://r.example.com/a": use host[:port]/path or oci://host[:port]/path`},
		},
		"an endpoint that is not a URL": {
			args:    []string{"--registry-repository", "r.example.com/a", "--ecr-endpoint", "localhost:1"},
			wantErr: []string{`--ecr-endpoint "localhost:1": use an http:// or https:// URL`},
		},
		"errors of the common flags are reported too": {
			args:    []string{"--registry-auth", "static", "--check-interval", "0s", "--stream-replicas", "2", "--repo-creds-secret", ""},
			wantErr: []string{"--stream-replicas 2: use 1, 3 or 5", "--check-interval 0s: use a duration above 0", "--repo-creds-secret is required"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var o Options
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want %v", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestMainRejectsBadFlagsWithExitCode2(t *testing.T) {
	var out strings.Builder
	if code := Main(t.Context(), []string{"--registry-auth", "nope"}, &out); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	var line struct{ Level, Component, Message, Error string }
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
		t.Fatalf("stderr %q is not one JSON line: %v", out.String(), err)
	}
	if line.Level != "error" || line.Component != "credrefresher" || !strings.Contains(line.Error, `invalid flags: --registry-auth "nope"`) {
		t.Errorf("stderr %q does not name the flag in an error line", out.String())
	}
}
