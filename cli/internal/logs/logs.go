// Package logs reads the operator's JSON log lines (servicekit/logging: one object per line with
// time, level, component, message and the shared fields), keeps those a filter matches, merges
// several sources by time and renders them for a terminal. It knows nothing of where the lines
// come from: pods' logs through the API server, or the local stack's log files.
package logs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// The fields the filter and the text read, as servicekit/logging names them (not imported: it
// would link zerolog into the plugin for seven strings).
const (
	keyComponent = "component"
	keyRollout   = "rollout"
	keyStep      = "step"
	keyRelease   = "release"
	keyMsgID     = "msg_id"
	keyOutcome   = "outcome"
	keyReason    = "reason"
)

// Line is one log line.
type Line struct {
	// Source names where it came from (a pod and container, or a file).
	Source string
	// Time is the line's time field; zero when it has none that parses.
	Time time.Time
	// Fields are the line's object.
	Fields map[string]any
	// Raw is the line as written.
	Raw []byte
}

// Str is a field as text ("" when absent).
func (l Line) Str(key string) string {
	switch v := l.Fields[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// Parse reads one line; ok is false for a line that is not a JSON object (the operator writes
// none, but a file may hold a panic's trace or another program's output).
func Parse(source string, raw []byte) (Line, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Line{}, false
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Line{}, false
	}
	l := Line{Source: source, Fields: fields, Raw: append([]byte(nil), raw...)}
	if s, ok := fields["time"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			l.Time = t
		}
	}
	return l, true
}

// levels orders zerolog's level names.
var levels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic"}

// Filter selects lines. Empty fields match every line.
type Filter struct {
	// Rollout keeps the lines of one rollout: its rollout field, or a step field of its steps
	// ("<rollout>/<index>") or a message ID of them ("<rollout>/<index>/<attempt>/<uid>").
	Rollout string
	// Step, with Rollout, keeps the lines of one step (its index); alone, a step ID.
	Step string
	// Fields are other field=value pairs that must all hold (release=gpu-operator, ...).
	Fields map[string]string
	// Since keeps lines at or after it (zero: all).
	Since time.Time
	// Level keeps lines at or above it (empty: all).
	Level string
}

// ValidateLevel checks a --level value.
func ValidateLevel(level string) error {
	if level != "" && !slices.Contains(levels, level) {
		return fmt.Errorf("--level %q: use one of %s", level, strings.Join(levels, ", "))
	}
	return nil
}

// Match says whether f keeps l.
func (f Filter) Match(l Line) bool {
	if !f.Since.IsZero() && (l.Time.IsZero() || l.Time.Before(f.Since)) {
		return false
	}
	if f.Level != "" && slices.Index(levels, l.Str("level")) < slices.Index(levels, f.Level) {
		return false
	}
	step, msgID := l.Str(keyStep), l.Str(keyMsgID)
	switch {
	case f.Rollout != "" && f.Step != "":
		id := f.Rollout + "/" + f.Step
		if step != id && !strings.HasPrefix(msgID, id+"/") {
			return false
		}
	case f.Step != "":
		if step != f.Step && !strings.HasPrefix(msgID, f.Step+"/") {
			return false
		}
	case f.Rollout != "":
		if l.Str(keyRollout) != f.Rollout && !strings.HasPrefix(step, f.Rollout+"/") && !strings.HasPrefix(msgID, f.Rollout+"/") {
			return false
		}
	}
	for k, v := range f.Fields {
		if l.Str(k) != v {
			return false
		}
	}
	return true
}

// Read reads the lines of r a filter keeps; lines that are not JSON objects are counted in
// skipped. A line longer than max bytes is cut there.
func Read(source string, r io.Reader, f Filter) (lines []Line, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		l, ok := Parse(source, sc.Bytes())
		if !ok {
			if len(bytes.TrimSpace(sc.Bytes())) > 0 {
				skipped++
			}
			continue
		}
		if f.Match(l) {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return lines, skipped, fmt.Errorf("read %s: %w", source, err)
	}
	return lines, skipped, nil
}

// Merge merges sources, each in the order it was written, into one sequence by time: the next
// line is always the earliest of the sources' next lines (a line without a time goes with the
// line before it), ties in source order. A source's own order is never changed.
func Merge(sources [][]Line) []Line {
	total := 0
	for _, s := range sources {
		total += len(s)
	}
	out := make([]Line, 0, total)
	next := make([]int, len(sources))
	for len(out) < total {
		best := -1
		for i, s := range sources {
			if next[i] >= len(s) {
				continue
			}
			if best < 0 || s[next[i]].Time.Before(sources[best][next[best]].Time) { //nolint:gosec // G602: best >= 0 here, by the || before it
				best = i
			}
		}
		out = append(out, sources[best][next[best]])
		next[best]++
	}
	return out
}

// Sorted returns the sources' names in a fixed order, to read them deterministically.
func Sorted(names []string) []string {
	out := slices.Clone(names)
	sort.Strings(out)
	return out
}

// shown are the fields a text line puts first, after the message, when present.
var shown = []string{keyRollout, keyStep, keyRelease, keyOutcome, keyReason, "error"}

// hidden are the fields a text line leaves out: the header says them.
var hidden = map[string]bool{"time": true, "level": true, keyComponent: true, "message": true}

// Text renders l for a person: time (UTC, milliseconds), component, level, message, then the
// fields: the operator's shared ones first, the rest sorted.
func Text(l Line) string {
	var b strings.Builder
	if l.Time.IsZero() {
		b.WriteString("--:--:--.---")
	} else {
		b.WriteString(l.Time.UTC().Format("15:04:05.000"))
	}
	comp := l.Str(keyComponent)
	if comp == "" {
		comp = l.Source
	}
	fmt.Fprintf(&b, " %-13s %-5s %s", comp, strings.ToUpper(l.Str("level")), l.Str("message"))
	var rest []string
	for k := range l.Fields {
		if !hidden[k] && !slices.Contains(shown, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range append(slices.Clone(shown), rest...) {
		if _, ok := l.Fields[k]; ok {
			v := l.Str(k)
			if strings.ContainsAny(v, " \t\"=") {
				v = fmt.Sprintf("%q", v)
			}
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	return b.String()
}
