package servicetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// raceReport is what a binary built with -race and -trimpath writes for one race.
const raceReport = `==================
WARNING: DATA RACE
Write at 0x00c0001a2f10 by goroutine 212:
  github.com/aicr-run/aicr-operator/planner/internal/controller.(*handler).keep()
      github.com/aicr-run/aicr-operator/planner/internal/controller/handlers.go:311 +0x1a4

Previous read at 0x00c0001a2f10 by goroutine 198:
  github.com/aicr-run/aicr-operator/planner/internal/controller.(*handler).apply()
      github.com/aicr-run/aicr-operator/planner/internal/controller/handlers.go:287 +0x8c

Goroutine 212 (running) created at:
  github.com/aicr-run/aicr-operator/servicekit/dispatch.(*Loop).Run()
      github.com/aicr-run/aicr-operator/servicekit/dispatch/dispatch.go:140 +0x2f0
==================
`

// wantReport is raceReport as RaceReports returns it: from the header to the closing rule.
var wantReport = strings.TrimSuffix(strings.TrimPrefix(raceReport, "==================\n"), "\n==================\n")

func TestRaceReportsFindsEachReportWhole(t *testing.T) {
	jsonLine := `{"level":"info","msg":"command applied","step":"s1"}` + "\n"
	long := "==================\nWARNING: DATA RACE\n" + strings.Repeat("  frame\n", 100) + "==================\n"
	tests := []struct {
		name string
		out  string
		want []string
	}{
		{"no race", jsonLine + jsonLine, nil},
		{"a header inside a line counts", `{"msg":"a test named WARNING: DATA RACE? no"}` + "\n", []string{`WARNING: DATA RACE? no"}`}},
		{"one between log lines", jsonLine + raceReport + jsonLine, []string{wantReport}},
		{"two", raceReport + jsonLine + raceReport, []string{wantReport, wantReport}},
		{"cut off at the end of the output", jsonLine + raceReport[:200], []string{strings.TrimPrefix(raceReport[:200], "==================\n")}},
		{"a long one is cut at 80 lines", long, []string{"WARNING: DATA RACE\n" + strings.Repeat("  frame\n", 79) + "... (21 more lines)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, RaceReports([]byte(tt.out))); diff != "" {
				t.Errorf("RaceReports (-want +got):\n%s", diff)
			}
		})
	}
}

// A test's audit reads only what the processes wrote after its mark, and says where each
// report is; a log that appeared after the mark is read whole.
func TestRacesSinceReadsOnlyAfterTheMark(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	before := `{"msg":"before"}` + "\n"
	write("planner.log", before+raceReport)
	write("applier.log", before)
	write("notes.txt", raceReport) // not a process log

	if got, err := RacesSince(dir, LogMark{}); err != nil || len(got) != 1 || got[0].Log != "planner.log" || got[0].Offset != int64(len(before)+len("==================\n")) {
		t.Fatalf("RacesSince(empty mark) = %v, %v; want the planner's one report at byte %d", got, err, len(before)+len("==================\n"))
	}

	mark := LogMarkOf(dir)
	if got, err := RacesSince(dir, mark); err != nil || len(got) != 0 {
		t.Fatalf("RacesSince(mark) with nothing written since = %v, %v; want none", got, err)
	}
	write("applier.log", raceReport)
	write("readiness-0.log", before+raceReport)
	got, err := RacesSince(dir, mark)
	if err != nil {
		t.Fatal(err)
	}
	want := []LogRace{
		{Log: "applier.log", Offset: int64(len(before) + len("==================\n")), Report: wantReport},
		{Log: "readiness-0.log", Offset: int64(len(before) + len("==================\n")), Report: wantReport},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RacesSince (-want +got):\n%s", diff)
	}
	if s := got[0].String(); !strings.HasPrefix(s, fmt.Sprintf("DATA RACE in applier.log at byte %d:\nWARNING: DATA RACE\nWrite at", len(before)+19)) {
		t.Errorf("String() = %q", s)
	}
}
