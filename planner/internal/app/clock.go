package app

import (
	"fmt"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// EnvTestClockOffset names the variable that, set to a Go duration ("5s", "-5s"), moves the
// clock of the planner's controller (the times it stamps on steps and commands and compares
// with them) by that much: a test's planner replica whose clock is off (make chaos runs one).
// It is an environment variable, not a flag, because no deployment needs it; the chart never
// sets it.
const EnvTestClockOffset = "AICR_TEST_CLOCK_OFFSET"

// controllerClock is the controller's clock: the real one, moved by EnvTestClockOffset when set.
func controllerClock() (clock.WithTicker, error) {
	v, ok := os.LookupEnv(EnvTestClockOffset)
	if !ok || v == "" {
		return clock.RealClock{}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want a Go duration such as 5s or -5s: %w", EnvTestClockOffset, v, err)
	}
	return offsetClock{offset: d}, nil
}

// offsetClock is the real clock moved by offset; its timers and tickers count real durations.
type offsetClock struct {
	clock.RealClock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
