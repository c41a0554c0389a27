package app

import (
	clientfeatures "k8s.io/client-go/features"
)

// streamingListGates turns client-go's WatchListClient on: the informer receives the initial
// Applications as a stream of watch events (sendInitialEvents) instead of one LIST response,
// so each Application is trimmed by watch.Transform as it arrives, and the untrimmed list of
// every Application (with Argo CD's resource lists and history) is never in memory at once: at
// thousands of Applications that list is the process's peak (docs/performance.md). An API
// server without streaming lists answers with an error and client-go falls back to LIST.
type streamingListGates struct{ clientfeatures.Gates }

func (g streamingListGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return true
	}
	return g.Gates.Enabled(f)
}

// enableStreamingList installs streamingListGates, once, before any informer starts.
func enableStreamingList() {
	if _, done := clientfeatures.FeatureGates().(streamingListGates); done {
		return
	}
	clientfeatures.ReplaceFeatureGates(streamingListGates{clientfeatures.FeatureGates()})
}
