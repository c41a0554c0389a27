//go:build e2e && !chaos

package chaos

import "time"

// make test (tag e2e): a short run, every fault kind at least once.
const (
	defaultRollouts = 3
	defaultDuration = 4 * time.Minute
)
