package app

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// The controller's clock is the real one unless AICR_TEST_CLOCK_OFFSET moves it; a value that is
// no duration is refused, naming the variable and what it accepts.
func TestControllerClockIsMovedOnlyByTheTestOffset(t *testing.T) {
	t.Setenv(EnvTestClockOffset, "")
	if c, err := controllerClock(); err != nil || c != (clock.RealClock{}) {
		t.Fatalf("unset: %v, %v; want the real clock", c, err)
	}
	t.Setenv(EnvTestClockOffset, "-5s")
	c, err := controllerClock()
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	got := c.Now()
	after := time.Now()
	if got.Before(before.Add(-5*time.Second)) || got.After(after.Add(-5*time.Second)) {
		t.Errorf("-5s: Now() %s, want between %s and %s", got, before.Add(-5*time.Second), after.Add(-5*time.Second))
	}
	if s := c.Since(before); s > -4*time.Second {
		t.Errorf("-5s: Since(a moment ago) = %s, want about -5s", s)
	}
	t.Setenv(EnvTestClockOffset, "five")
	if _, err := controllerClock(); err == nil || !strings.Contains(err.Error(), EnvTestClockOffset) || !strings.Contains(err.Error(), "Go duration") {
		t.Errorf("five: %v; want an error naming %s and what it accepts", err, EnvTestClockOffset)
	}
}
