package service

import (
	"errors"
	"runtime"
	"testing"
)

// TestLeaderOutcome is RunLeader's answer from how its run ended: work's own error wins unless
// the fence stopped the work, and a lost or stale lease is an error so the binary exits.
func TestLeaderOutcome(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	const lost = "lost leadership of lease aicr-system/aicr-planner"
	cases := map[string]struct {
		o    leaderOutcome
		want string
	}{
		"the context ended":                     {o: leaderOutcome{}, want: ""},
		"work failed":                           {o: leaderOutcome{work: boom}, want: "boom"},
		"work failed, then leadership was lost": {o: leaderOutcome{work: boom, lost: true}, want: "boom"},
		"leadership lost":                       {o: leaderOutcome{lost: true}, want: lost},
		"the fence closed":                      {o: leaderOutcome{stale: true}, want: lost},
		"the fence closed and work said so":     {o: leaderOutcome{work: boom, stale: true}, want: lost},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.o.err("aicr-system/aicr-planner")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("err = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLeaderRunWaitsForWorkThatBegan proves finish waits for work that began, and that work
// offered leadership after the election ended does not begin.
func TestLeaderRunWaitsForWorkThatBegan(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	run := newLeaderRun()
	if !run.begin() {
		t.Fatal("begin refused before the election ended")
	}
	finished := make(chan leaderOutcome)
	go func() { finished <- run.finish() }()
	// Once finish has ended the election, work ends: finish must have waited for it.
	for ended := false; !ended; {
		runtime.Gosched()
		run.mu.Lock()
		ended = run.finished
		run.mu.Unlock()
	}
	run.goStale()
	run.workEnded(boom)
	o := <-finished
	if o.work != boom || !o.stale || o.lost {
		t.Errorf("outcome = %+v, want work boom, stale", o)
	}
	if run.begin() {
		t.Error("begin accepted after the election ended")
	}

	idle := newLeaderRun()
	if o := idle.finish(); o != (leaderOutcome{}) {
		t.Errorf("outcome of a run whose work never began = %+v, want none", o)
	}
	if idle.begin() {
		t.Error("begin accepted after the election ended")
	}
}
