package logs

import (
	"strings"
	"testing"
	"time"
)

func lines(t *testing.T, source string, text string) []Line {
	t.Helper()
	got, skipped, err := Read(source, strings.NewReader(text), Filter{})
	if err != nil || skipped != 0 {
		t.Fatalf("read: %v, %d skipped", err, skipped)
	}
	return got
}

func TestFilter(t *testing.T) {
	at := func(s string) time.Time { tm, _ := time.Parse(time.RFC3339, s); return tm }
	l := func(js string) Line {
		line, ok := Parse("p", []byte(js))
		if !ok {
			t.Fatalf("parse %s", js)
		}
		return line
	}
	byRollout := l(`{"time":"2026-12-07T04:00:00.000Z","level":"info","rollout":"r-a-none","message":"created"}`)
	byStep := l(`{"time":"2026-12-07T04:00:01.000Z","level":"info","step":"r-a-none/2","release":"nfd","message":"written"}`)
	byMsg := l(`{"time":"2026-12-07T04:00:02.000Z","level":"warn","msg_id":"r-a-none/12/1/abcd1234","message":"nak"}`)
	other := l(`{"time":"2026-12-07T04:00:03.000Z","level":"error","step":"r-a-none-x/2","rollout":"r-b-a","message":"other"}`)
	for _, c := range []struct {
		name string
		f    Filter
		want []Line
	}{
		{"rollout: its field, its steps and its messages", Filter{Rollout: "r-a-none"}, []Line{byRollout, byStep, byMsg}},
		{"rollout and step", Filter{Rollout: "r-a-none", Step: "2"}, []Line{byStep}},
		{"step 12 is not step 1", Filter{Rollout: "r-a-none", Step: "1"}, nil},
		{"step ID alone", Filter{Step: "r-a-none/12"}, []Line{byMsg}},
		{"field", Filter{Fields: map[string]string{"release": "nfd"}}, []Line{byStep}},
		{"level", Filter{Level: "warn"}, []Line{byMsg, other}},
		{"since", Filter{Since: at("2026-12-07T04:00:02Z")}, []Line{byMsg, other}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, x := range []Line{byRollout, byStep, byMsg, other} {
				if c.f.Match(x) {
					got = append(got, x.Str("message"))
				}
			}
			var want []string
			for _, x := range c.want {
				want = append(want, x.Str("message"))
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("matched %v, want %v", got, want)
			}
		})
	}
}

// Merge interleaves sources by time and keeps each source's order, even where its own times go
// backwards; equal times go in source order.
func TestMerge(t *testing.T) {
	a := lines(t, "a", `{"time":"2026-12-07T04:00:00.100Z","message":"a1"}
{"time":"2026-12-07T04:00:00.300Z","message":"a2"}
{"time":"2026-12-07T04:00:00.200Z","message":"a3"}
`)
	b := lines(t, "b", `{"time":"2026-12-07T04:00:00.100Z","message":"b1"}
{"time":"2026-12-07T04:00:00.250Z","message":"b2"}
`)
	var got []string
	for _, l := range Merge([][]Line{a, b}) {
		got = append(got, l.Str("message"))
	}
	if strings.Join(got, " ") != "a1 b1 b2 a2 a3" {
		t.Errorf("merged %v, want a1 b1 b2 a2 a3", got)
	}
}

func TestReadSkipsWhatIsNotJSON(t *testing.T) {
	got, skipped, err := Read("f", strings.NewReader("panic: oops\n\n{\"message\":\"ok\"}\ngoroutine 1 [running]:\n"), Filter{})
	if err != nil || skipped != 2 || len(got) != 1 {
		t.Errorf("read: %d lines, %d skipped, %v; want 1 and 2", len(got), skipped, err)
	}
}

func TestText(t *testing.T) {
	l, _ := Parse("pod-1", []byte(`{"time":"2026-12-07T04:05:06.789Z","level":"warn","component":"planner","message":"step failed","zeta":1,"alpha":"two words","release":"nfd","step":"r-1/2","rollout":"r-1"}`))
	want := `04:05:06.789 planner       WARN  step failed rollout=r-1 step=r-1/2 release=nfd alpha="two words" zeta=1`
	if got := Text(l); got != want {
		t.Errorf("text\n%q\nwant\n%q", got, want)
	}
}
