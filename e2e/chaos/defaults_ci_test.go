//go:build e2e && !chaos

package chaos

import "time"

// make test (tag e2e): a short run, every fault kind at least once. Its few measurements per
// kind, on a machine running the rest of make test beside it, are reported, not asserted.
const (
	defaultRollouts = 3
	defaultDuration = 4 * time.Minute
	// buildTag is the tag that builds this run, for the replay command the test logs.
	buildTag             = "e2e"
	defaultRecoveryBound = time.Duration(0)
)
