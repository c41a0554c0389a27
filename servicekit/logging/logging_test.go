package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNewRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		format, level string
		want          string
	}{
		"an unknown level":  {format: FormatJSON, level: "loud", want: `--log-level "loud": use trace, debug, info, warn or error`},
		"an empty level":    {format: FormatJSON, level: "", want: `--log-level "": use trace, debug, info, warn or error`},
		"an unknown format": {format: "yaml", level: "info", want: `--log-format "yaml": use json or console`},
		"an empty format":   {format: "", level: "info", want: `--log-format "": use json or console`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(&bytes.Buffer{}, tc.format, tc.level, "planner")
			if err == nil || err.Error() != tc.want {
				t.Errorf("New error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNewJSON proves the JSON logger writes one object per line with the component field and
// honours the level.
func TestNewJSON(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, FormatJSON, "INFO", "planner")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	log.Debug().Msg("hidden")
	log.Info().Str(KeyRelease, "gpu-operator").Msg("write application")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1 (debug filtered at info): %q", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("not JSON: %v: %s", err, lines[0])
	}
	for k, v := range map[string]any{"component": "planner", "level": "info", "release": "gpu-operator", "message": "write application"} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
	ts, _ := line["time"].(string)
	if at, err := time.Parse(TimeFormat, ts); err != nil || len(ts) != len("2006-01-02T15:04:05.000Z") || time.Since(at) > time.Minute {
		t.Errorf("time = %q, want the time of the line in UTC with milliseconds (%s): %v", ts, TimeFormat, err)
	}
}

func TestNewConsole(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, FormatConsole, "debug", "applier")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	log.Debug().Msg("apply release")
	if out := buf.String(); !strings.Contains(out, "apply release") || strings.HasPrefix(out, "{") {
		t.Errorf("console output = %q, want a human line", out)
	}
}

// TestContext proves the logger travels in the context and a context without one gives a
// disabled logger rather than a panic or zerolog's global logger.
func TestContext(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, FormatJSON, "info", "readiness")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := Into(context.Background(), log.With().Str(KeyStep, "cluster-1/2").Logger())
	From(ctx).Info().Msg("judge release")
	if !strings.Contains(buf.String(), `"step":"cluster-1/2"`) {
		t.Errorf("logger from the context lost its fields: %s", buf.String())
	}
	From(context.Background()).Error().Msg("goes nowhere")
}
