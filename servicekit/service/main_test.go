package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestMainExitLines proves the reason for a non-zero exit is one JSON log line in the binary's
// format (text with --log-format=console or when the format is unknown), and that a clean stop
// writes nothing.
func TestMainExitLines(t *testing.T) {
	cases := map[string]struct {
		args    []string
		runErr  error
		code    int
		json    bool
		wantErr string // in the error field (JSON) or the text
	}{
		"bad flags":             {args: []string{"--stream-replicas=2"}, code: 2, json: true, wantErr: "invalid flags: --stream-replicas 2: use 1, 3 or 5"},
		"a failed run":          {runErr: errors.New("connect to nats: refused"), code: 1, json: true, wantErr: "connect to nats: refused"},
		"a failed run, console": {args: []string{"--log-format=console"}, runErr: errors.New("refused"), code: 1, wantErr: "refused"},
		"an unknown log format": {args: []string{"--log-format=yaml"}, runErr: errors.New(`--log-format "yaml": use json or console`), code: 1, wantErr: `planner: --log-format "yaml"`},
		"a clean stop":          {runErr: context.Canceled, code: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			var o Options
			code := Main(t.Context(), "planner", tc.args, &out, &o, func(context.Context) error { return tc.runErr })
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; output %q", code, tc.code, out.String())
			}
			if tc.wantErr == "" {
				if out.Len() != 0 {
					t.Errorf("output %q, want none", out.String())
				}
				return
			}
			if !tc.json {
				if !strings.Contains(out.String(), tc.wantErr) || strings.HasPrefix(out.String(), "{") {
					t.Errorf("output %q, want text with %q", out.String(), tc.wantErr)
				}
				return
			}
			var line map[string]any
			if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
				t.Fatalf("output %q is not one JSON line: %v", out.String(), err)
			}
			if line["level"] != "error" || line["component"] != "planner" || line["error"] != tc.wantErr || line["message"] != "planner exits" {
				t.Errorf("exit line %v, want an error line of planner with error %q", line, tc.wantErr)
			}
		})
	}
}
