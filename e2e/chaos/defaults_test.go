//go:build chaos

package chaos

import "time"

// make chaos (tag chaos): the long run.
const (
	defaultRollouts = 20
	defaultDuration = time.Duration(0)
)
