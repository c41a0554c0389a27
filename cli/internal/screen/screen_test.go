package screen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Not a terminal: the size falls back to 80x24, which is what these frames are checked against.
func TestDrawOverwritesThePreviousFrame(t *testing.T) {
	var b bytes.Buffer
	s := New(&b, -1)
	if err := s.Draw([]string{"one", "two"}); err != nil {
		t.Fatal(err)
	}
	if want := "\x1b[?25lone\x1b[K\ntwo\x1b[K\n\x1b[J"; b.String() != want {
		t.Errorf("first frame %q, want %q", b.String(), want)
	}
	b.Reset()
	_ = s.Draw([]string{strings.Repeat("x", 100)})
	if want := "\r\x1b[2A" + strings.Repeat("x", 78) + "…\x1b[K\n\x1b[J"; b.String() != want {
		t.Errorf("second frame %q, want %q: up two rows, one line cut to the width", b.String(), want)
	}
	b.Reset()
	var tall []string
	for i := 0; i < 40; i++ {
		tall = append(tall, fmt.Sprint("line ", i))
	}
	_ = s.Draw(tall)
	if got := strings.Count(b.String(), "\n"); got != 23 || !strings.Contains(b.String(), "… 18 more lines") {
		t.Errorf("a tall frame takes %d rows:\n%q", got, b.String())
	}
	b.Reset()
	_ = s.Close()
	if b.String() != "\x1b[?25h" {
		t.Errorf("Close wrote %q, want the cursor shown", b.String())
	}
}
