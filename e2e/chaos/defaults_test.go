//go:build chaos

package chaos

import "time"

// make chaos (tag chaos): the long run. Its recovery bound is what the operator must never
// exceed, not the 5 s target the report compares with: a p99 stall above it (a command waiting
// for a redelivery that never comes, a leader that never takes over) fails the run.
const (
	defaultRollouts = 20
	defaultDuration = time.Duration(0)
	// buildTag is the tag that builds this run, for the replay command the test logs.
	buildTag             = "chaos"
	defaultRecoveryBound = 20 * time.Second
)
