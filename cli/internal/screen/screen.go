// Package screen redraws a block of lines in place on a terminal: each frame overwrites the
// previous one (cursor up, rewrite, clear what is left), so a live view is one screen that
// updates rather than a scrolling log, and the last frame stays in the scrollback when it ends.
package screen

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// Terminal reports whether w is a terminal, and its file descriptor.
func Terminal(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// Screen draws frames on a terminal.
type Screen struct {
	w  io.Writer
	fd int
	// drawn is how many rows the previous frame took, on a terminal of width x height.
	drawn, width, height int
	// hidden says the cursor was hidden (and must be shown again).
	hidden bool
}

// New draws on w, a terminal with file descriptor fd.
func New(w io.Writer, fd int) *Screen { return &Screen{w: w, fd: fd} }

// size is the terminal's size, 80x24 when it cannot be read.
func (s *Screen) size() (int, int) {
	w, h, err := term.GetSize(s.fd)
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// Draw replaces the previous frame with lines. Each line is cut to the terminal's width (so one
// line takes one row and the rows to go back up are known), and a frame taller than the
// terminal is cut with a note of how much was left out.
func (s *Screen) Draw(lines []string) error {
	width, height := s.size()
	if room := height - 1; len(lines) > room && room > 1 {
		more := len(lines) - (room - 1)
		lines = append(lines[:room-1:room-1], fmt.Sprintf("… %d more lines (a taller window shows them)", more))
	}
	var b strings.Builder
	if !s.hidden {
		b.WriteString("\x1b[?25l")
		s.hidden = true
	}
	switch {
	case s.drawn > 0 && (width != s.width || height != s.height):
		// The terminal was resized: the old rows may have rewrapped, so start on a clear screen.
		b.WriteString("\x1b[H\x1b[2J")
	case s.drawn > 0:
		fmt.Fprintf(&b, "\r\x1b[%dA", s.drawn)
	}
	s.width, s.height = width, height
	for _, l := range lines {
		b.WriteString(style.Truncate(l, width-1))
		b.WriteString("\x1b[K\n")
	}
	b.WriteString("\x1b[J")
	s.drawn = len(lines)
	_, err := io.WriteString(s.w, b.String())
	return err
}

// Close shows the cursor again; the last frame stays on the terminal.
func (s *Screen) Close() error {
	if !s.hidden {
		return nil
	}
	s.hidden = false
	_, err := io.WriteString(s.w, "\x1b[?25h")
	return err
}
