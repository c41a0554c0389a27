package redact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
)

func TestString(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("QVdTOmV5SndZWGxzYjJGa0lqb2lZV0pq", 4) // base64, 128 characters
	tests := map[string]struct {
		known []string
		in    string
		want  string
	}{
		"a known short secret":            {known: []string{"hunter22"}, in: "password hunter22 rejected", want: "password [redacted] rejected"},
		"a token-shaped run unknown":      {in: "bad token " + long + " here", want: "bad token [redacted] here"},
		"a token with slashes and pluses": {in: "token: ab+/cdEFGH1234567890abcdefghijklmnopqrstuvwxyz==", want: "token: [redacted]"},
		"an ARN stays readable": {
			in:   "User: arn:aws:sts::123456789012:assumed-role/aicr-operator-credrefresher/i-0123456789abcdef0 is not authorized",
			want: "User: arn:aws:sts::123456789012:assumed-role/aicr-operator-credrefresher/i-0123456789abcdef0 is not authorized",
		},
		"a request ID stays readable": {in: "RequestID: 8f0c1e44-4f6b-4a57-9d0e-0c1f3e2d1a10", want: "RequestID: 8f0c1e44-4f6b-4a57-9d0e-0c1f3e2d1a10"},
		"the longer of two overlapping secrets is hidden whole": {
			known: []string{"abcd", "abcdefgh"}, in: "x abcdefgh y", want: "x [redacted] y",
		},
		"values too short to hide are ignored": {known: []string{"a", ""}, in: "a cat", want: "a cat"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &redact.Redactor{}
			r.Add(tc.known...)
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestErrorAndNil(t *testing.T) {
	var r *redact.Redactor // a nil Redactor still hides token-shaped runs
	if got := r.Error(errors.New("x " + strings.Repeat("A", 50))); got != "x [redacted]" {
		t.Errorf("Error = %q", got)
	}
	if got := r.Error(nil); got != "" {
		t.Errorf("Error(nil) = %q", got)
	}
}
