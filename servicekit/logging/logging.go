// Package logging builds the one zerolog logger each binary uses and names the field keys every
// log line shares. The logger travels in the context; never use zerolog's global logger. Never
// log a token, a password or a Secret's data.
package logging

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Field keys, snake_case, shared by every binary.
const (
	KeyComponent    = "component"
	KeyRuntime      = "runtime"
	KeyRollout      = "rollout"
	KeyStep         = "step"
	KeyRelease      = "release"
	KeyPlanDigest   = "plan_digest"
	KeySubject      = "subject"
	KeyMsgID        = "msg_id"
	KeyMsgType      = "msg_type"
	KeyResourceName = "resource_name"
	KeyRegistry     = "registry"
	KeyExpiresAt    = "expires_at"
	KeyDuration     = "duration"
	KeyOutcome      = "outcome"
	KeyReason       = "reason"
	KeyDelivered    = "delivered"
	KeyFailures     = "failures"
	KeyParkedTo     = "parked_to"
)

// Formats.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// TimeFormat is the format of every line's time field: RFC 3339 in UTC with milliseconds, so
// the lines of several processes within one second can be put in order.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// timeHook writes the time field in TimeFormat (zerolog's Timestamp would use its global
// TimeFieldFormat, seconds by default).
type timeHook struct{}

func (timeHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(TimeFormat))
}

// New returns a logger writing to w (stderr when nil) in format (json or console) at level
// (trace, debug, info, warn, error), with the component field set.
func New(w io.Writer, format, level, component string) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: use trace, debug, info, warn or error", level)
	}
	switch format {
	case FormatJSON:
	case FormatConsole:
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: use json or console", format)
	}
	return zerolog.New(w).Level(lvl).Hook(timeHook{}).With().Str(KeyComponent, component).Logger(), nil
}

// Into returns ctx carrying l.
func Into(ctx context.Context, l zerolog.Logger) context.Context { return l.WithContext(ctx) }

// From returns the logger in ctx (a disabled logger when there is none).
func From(ctx context.Context) *zerolog.Logger { return zerolog.Ctx(ctx) }
