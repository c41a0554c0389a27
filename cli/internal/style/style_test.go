package style

import "testing"

func TestWidthTruncatePad(t *testing.T) {
	red := Style{Color: true}.State("Failed", "failed step")
	for name, tc := range map[string]struct {
		in    string
		width int
		want  string
	}{
		"fits":                          {"abc", 5, "abc"},
		"cut with an ellipsis":          {"abcdef", 4, "abc…"},
		"runes count once":              {"✓ ✓ ✓ ✓", 3, "✓ …"},
		"colour is kept whole and ends": {red, 4, "\x1b[1;31mfai…\x1b[0m"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Truncate(tc.in, tc.width); got != tc.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
			}
		})
	}
	if w := Width(red); w != len("failed step") {
		t.Errorf("Width of a coloured string = %d", w)
	}
	if got := Pad(red, 13); Width(got) != 13 {
		t.Errorf("Pad gives width %d", Width(got))
	}
}

func TestEscape(t *testing.T) {
	if got := Escape("a\x1b[2Jb\rc\nd"); got != "a^[[2Jb\\rc d" {
		t.Errorf("Escape = %q", got)
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		done, total, width int
		want               string
	}{{7, 18, 18, "[#######-----------]"}, {0, 0, 4, "[----]"}, {3, 3, 5, "[#####]"}} {
		if got := Bar(tc.done, tc.total, tc.width); got != tc.want {
			t.Errorf("Bar(%d, %d, %d) = %q, want %q", tc.done, tc.total, tc.width, got, tc.want)
		}
	}
}
