package watch

import (
	"testing"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// The kinds appspec.Detect reports are the bus's: readiness publishes them as DriftReport kinds
// and the planner decides on them (appspec does not import the bus, to keep NATS out of the
// kubectl plugin).
func TestDriftKindsAreTheBusKinds(t *testing.T) {
	for got, want := range map[string]string{
		appspec.DriftSource: bus.DriftSource, appspec.DriftValues: bus.DriftValues, appspec.DriftDestination: bus.DriftDestination,
		appspec.DriftOther: bus.DriftOther, appspec.DriftAutoSyncDisabled: bus.DriftAutoSyncDisabled, appspec.DriftFinalizerAdded: bus.DriftFinalizerAdded,
	} {
		if got != want {
			t.Errorf("appspec kind %q, the bus says %q", got, want)
		}
	}
}
