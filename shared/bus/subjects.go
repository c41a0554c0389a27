package bus

import (
	"fmt"
	"strings"
)

// Subjects. Every subject the binaries use is here; build concrete subjects with the functions
// below, never by hand. Tokens are runtime and release names (DNS-1123 labels: no dots).
const (
	// Prefix is the versioned root of every subject.
	Prefix = "aicr.v1"

	// SubjectCommands matches every command (the commands stream).
	SubjectCommands = Prefix + ".cmd.>"
	// SubjectApplyPattern: planner → applier, write one release's Application
	// (aicr.v1.cmd.apply.<runtime>.<release>).
	SubjectApplyPattern = Prefix + ".cmd.apply.*.*"
	// SubjectRemovePattern: planner → applier, the Remove sequence of one release
	// (aicr.v1.cmd.remove.<runtime>.<release>).
	SubjectRemovePattern = Prefix + ".cmd.remove.*.*"

	// SubjectEvents matches every event (the events stream).
	SubjectEvents = Prefix + ".evt.>"
	// SubjectAppliedPattern: applier → planner, the result of one command
	// (aicr.v1.evt.applied.<runtime>.<release>).
	SubjectAppliedPattern = Prefix + ".evt.applied.*.*"
	// SubjectVerdictPattern: readiness → planner, a release's readiness verdict
	// (aicr.v1.evt.release.<runtime>.<release>).
	SubjectVerdictPattern = Prefix + ".evt.release.*.*"
	// SubjectDriftPattern: readiness → planner, drift or deletion of an owned Application
	// (aicr.v1.evt.drift.<runtime>.<release>).
	SubjectDriftPattern = Prefix + ".evt.drift.*.*"
	// SubjectEngine: readiness → planner, whether Argo CD's CRDs and the AppProject exist.
	SubjectEngine = Prefix + ".evt.engine"
	// SubjectCredentials: credrefresher → planner, the registry credentials' state.
	SubjectCredentials = Prefix + ".evt.credentials"
	// SubjectAudit: admission → audit, each denial.
	SubjectAudit = Prefix + ".evt.audit.admission"
)

// ApplySubject is the subject of an ApplyCommand.
func ApplySubject(runtime, release string) string { return join("cmd.apply", runtime, release) }

// RemoveSubject is the subject of a RemoveCommand.
func RemoveSubject(runtime, release string) string { return join("cmd.remove", runtime, release) }

// AppliedSubject is the subject of an ApplyResult.
func AppliedSubject(runtime, release string) string { return join("evt.applied", runtime, release) }

// VerdictSubject is the subject of a ReleaseVerdict.
func VerdictSubject(runtime, release string) string { return join("evt.release", runtime, release) }

// DriftSubject is the subject of a DriftReport.
func DriftSubject(runtime, release string) string { return join("evt.drift", runtime, release) }

func join(kind, runtime, release string) string {
	return Prefix + "." + kind + "." + token(runtime) + "." + token(release)
}

// token keeps a name from adding subject levels or wildcards, or whitespace and control
// characters that would split the NATS protocol line, and keeps two names from sharing a
// subject. Valid names (DNS-1123 labels) pass unchanged; in any other name each byte that is
// '_', '.', '*', '>', a space or control character, DEL or part of a non-ASCII character
// becomes "_" and two hex digits, and the empty name becomes "_". '_' is never left as it is,
// so the encoding is one-to-one: two names never map to one token.
func token(s string) string {
	if s == "" {
		return "_"
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return r > 0x7e || escaped(byte(r)) }) { //nolint:gosec // G115: byte(r) is read only when r <= 0x7e
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; escaped(c) {
			fmt.Fprintf(&b, "_%02x", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func escaped(c byte) bool {
	return c == '_' || c == '.' || c == '*' || c == '>' || c <= ' ' || c >= 0x7f
}
