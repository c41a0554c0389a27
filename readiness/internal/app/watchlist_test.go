package app

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

func TestEnableStreamingList(t *testing.T) {
	enableStreamingList()
	enableStreamingList() // idempotent: the gates are wrapped once
	g := clientfeatures.FeatureGates()
	if !g.Enabled(clientfeatures.WatchListClient) {
		t.Errorf("WatchListClient is off; the informer would LIST every Application at once")
	}
	sg, ok := g.(streamingListGates)
	if !ok {
		t.Fatalf("feature gates are %T, want streamingListGates", g)
	}
	if _, nested := sg.Gates.(streamingListGates); nested {
		t.Errorf("the gates were wrapped twice")
	}
	if g.Enabled(clientfeatures.InformerResourceVersion) != sg.Gates.Enabled(clientfeatures.InformerResourceVersion) {
		t.Errorf("other gates must keep their values")
	}
}
