// Package style colours text by a step's state for a terminal, and escapes what comes from the
// cluster so that a message cannot drive the terminal.
package style

import (
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Unchanged is the state of a release without a step (graph.StateUnchanged).
const Unchanged = "Unchanged"

// Style says whether to colour.
type Style struct {
	// Color writes ANSI colours.
	Color bool
}

const reset = "\x1b[0m"

// code is the SGR sequence of each state.
var code = map[string]string{
	string(v1alpha1.StepSucceeded):        "\x1b[32m",
	string(v1alpha1.StepInProgress):       "\x1b[1;33m",
	string(v1alpha1.StepPending):          "",
	string(v1alpha1.StepAwaitingApproval): "\x1b[1;35m",
	string(v1alpha1.StepFailed):           "\x1b[1;31m",
	string(v1alpha1.StepBlocked):          "\x1b[31m",
	Unchanged:                             "\x1b[90m",
}

// symbol is the mark of each state.
var symbol = map[string]string{
	string(v1alpha1.StepSucceeded):        "✓",
	string(v1alpha1.StepInProgress):       "●",
	string(v1alpha1.StepPending):          "○",
	string(v1alpha1.StepAwaitingApproval): "?",
	string(v1alpha1.StepFailed):           "✗",
	string(v1alpha1.StepBlocked):          "!",
	Unchanged:                             "·",
}

// Symbol is the one-character mark of a state.
func Symbol(state string) string {
	if s, ok := symbol[state]; ok {
		return s
	}
	return "○"
}

// State colours text as state.
func (s Style) State(state, text string) string {
	if c := code[state]; s.Color && c != "" {
		return c + text + reset
	}
	return text
}

// Ready colours a condition status: True green, False yellow, Unknown plain.
func (s Style) Ready(status, text string) string {
	switch {
	case !s.Color:
		return text
	case status == "True":
		return "\x1b[32m" + text + reset
	case status == "False":
		return "\x1b[33m" + text + reset
	}
	return text
}

// Bold emphasises text.
func (s Style) Bold(text string) string {
	if !s.Color {
		return text
	}
	return "\x1b[1m" + text + reset
}

// Dim de-emphasises text.
func (s Style) Dim(text string) string {
	if !s.Color {
		return text
	}
	return "\x1b[2m" + text + reset
}

// Escape makes a string from the cluster safe to print on a terminal: escape characters and
// carriage returns are shown, not obeyed; a newline becomes a space.
func Escape(s string) string {
	return printers.EscapeTerminal(strings.ReplaceAll(s, "\n", " "))
}

// Bar is a progress bar of width cells: done of total.
func Bar(done, total, width int) string {
	if width < 1 {
		width = 1
	}
	fill := 0
	if total > 0 {
		fill = done * width / total
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat("-", width-fill) + "]"
}

// Width is the number of terminal cells s takes: its runes, without ANSI sequences.
func Width(s string) int {
	n := 0
	in := false
	for _, r := range s {
		switch {
		case in:
			if (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') {
				in = false
			}
		case r == '\x1b':
			in = true
		default:
			n++
		}
	}
	return n
}

// Truncate cuts s to at most width cells, keeping ANSI sequences whole and ending with "…" when
// it cut.
func Truncate(s string, width int) string {
	if Width(s) <= width {
		return s
	}
	if width <= 0 {
		return ""
	}
	var b strings.Builder
	n := 0
	in := false
	colored := false
	for _, r := range s {
		switch {
		case in:
			b.WriteRune(r)
			if (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') {
				in = false
			}
			continue
		case r == '\x1b':
			in, colored = true, true
			b.WriteRune(r)
			continue
		}
		if n == width-1 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	if colored {
		b.WriteString(reset)
	}
	return b.String()
}

// Pad right-pads s with spaces to width cells.
func Pad(s string, width int) string {
	if w := Width(s); w < width {
		return s + strings.Repeat(" ", width-w)
	}
	return s
}
