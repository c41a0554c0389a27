package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// fakeParked is a parked stream in memory; retrying a message removes it, unless refuse names it.
type fakeParked struct {
	held    []*bus.Parked
	retried []uint64
	refuse  map[uint64]bool
}

func (f *fakeParked) Read(_ context.Context, limit int) (bus.ParkedState, error) {
	return bus.ParkedState{Total: uint64(len(f.held)), Oldest: slices.Clone(f.held[:min(limit, len(f.held))])}, nil
}

func (f *fakeParked) Retry(_ context.Context, p *bus.Parked) error {
	if f.refuse[p.Seq] {
		return errors.New("no stream leader")
	}
	f.retried = append(f.retried, p.Seq)
	for i, h := range f.held {
		if h.Seq == p.Seq {
			f.held = append(f.held[:i], f.held[i+1:]...)
			break
		}
	}
	return nil
}

// updatingStore keeps what UpdateRuntime writes.
type updatingStore struct{ *memStore }

func (s updatingStore) UpdateRuntime(_ context.Context, rt *v1alpha1.ClusterRuntime) (*v1alpha1.ClusterRuntime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtime = rt.DeepCopy()
	return rt.DeepCopy(), nil
}

// The retry annotation sends every parked message back (one that cannot be sent stays parked
// and shown), removes the annotation, and MessagesParked then shows what is left; a runtime
// without the annotation retries nothing.
func TestRetryParkedSendsThemBackAndRemovesTheAnnotation(t *testing.T) {
	parked := &fakeParked{held: []*bus.Parked{{Seq: 1, Subject: "a"}, {Seq: 2, Subject: "b"}, {Seq: 3, Subject: "c"}}, refuse: map[uint64]bool{2: true}}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName}}
	store := updatingStore{&memStore{runtime: rt}}
	c := New(Config{Name: "planner", Namespace: "aicr-system", Parked: parked}, store, nil)
	ctx := context.Background()

	got, err := c.retryParked(ctx, rt)
	if err != nil || len(parked.retried) != 0 || got != rt {
		t.Fatalf("without the annotation: retried %v, %v", parked.retried, err)
	}

	rt.Annotations = map[string]string{v1alpha1.AnnotationRetryParked: "2026-12-07T04:00:00Z", "other": "kept"}
	got, err = c.retryParked(ctx, rt)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked.retried) != 2 || parked.retried[0] != 1 || parked.retried[1] != 3 {
		t.Errorf("retried %v, want 1 and 3", parked.retried)
	}
	if _, ok := got.Annotations[v1alpha1.AnnotationRetryParked]; ok || got.Annotations["other"] != "kept" {
		t.Errorf("annotations after the retry: %v", got.Annotations)
	}
	if stored, _ := store.GetRuntime(ctx, rt.Name); stored.Annotations[v1alpha1.AnnotationRetryParked] != "" {
		t.Errorf("the stored runtime keeps the annotation: %v", stored.Annotations)
	}
	if st := c.knownParked(); st == nil || st.Total != 1 || st.Oldest[0].Seq != 2 {
		t.Errorf("parked as known after the retry: %+v, want message 2 alone", st)
	}
}
