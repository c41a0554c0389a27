package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

// markedStore is the harness's store, telling of every check of a runtime whose name starts
// with "mark-" (no runtime has one: the check finds nothing and does nothing). The drift
// worker is one goroutine taking keys in the order they were queued, so a mark's check means
// every check queued before it has ended.
type markedStore struct {
	*memStore
	marks chan string
}

func (s markedStore) GetRuntime(ctx context.Context, name string) (*v1alpha1.ClusterRuntime, error) {
	if strings.HasPrefix(name, "mark-") {
		s.marks <- name
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.Group, Resource: resRuntimes}, name)
	}
	return s.memStore.GetRuntime(ctx, name)
}

// waitMark waits for the check of the named mark.
func waitMark(t *testing.T, marks <-chan string, name, what string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-marks:
			if m == name {
				return
			}
		case <-timeout:
			t.Fatalf("timed out after 10s waiting for %s (the check of %s)", what, name)
		}
	}
}

// With every hint of a change lost (no Application event reaches the planner, no drift report
// is delivered), the periodic resync alone forces an edit back and writes a deleted
// Application again, within --drift-resync of the change; and once the Applications are as
// the plan says, the next resync publishes nothing. The planner's clock is fake: nothing
// before the resync is due repairs anything, and the repairs are published at the tick.
func TestTheResyncAloneForcesBackWhatNoEventOrReportTold(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	marks := make(chan string, 64)
	h := newDriftHarnessWith(t, driftOptions{
		releases: 3, clock: clk, resync: DefaultDriftResync,
		// Every resync checks the runtime, then the mark: its check ends after the runtime's.
		names: []string{v1alpha1.RuntimeName, "mark-resync"},
		store: func(s *memStore) Store { return markedStore{memStore: s, marks: marks} },
	})
	ctx := context.Background()

	// The check of every release once the cache synced (after the resync's ticker started),
	// and the checks queued by the informer's first Add of each Application, are over before
	// anything is changed: the Adds are handled in list order, so once the last Application's
	// is seen, the edited and deleted releases' checks are queued ahead of the fence.
	waitMark(t, marks, "mark-resync", "the first check of every release")
	servicetest.Eventually(t, 5*time.Second, "the informer's handlers to see every Application", func() (bool, string) {
		h.c.drift.mu.Lock()
		defer h.c.drift.mu.Unlock()
		_, ok := h.c.drift.seen[h.plan.Releases[len(h.plan.Releases)-1].Name]
		return ok, ""
	})
	h.c.checkRuntime("mark-fence")
	waitMark(t, marks, "mark-fence", "the checks the informer's first events queued")
	if got := h.pub.IDs(); len(got) != 0 {
		t.Fatalf("published %v with every Application as the plan says", got)
	}

	// A person edits one Application's values and deletes another. The informer's store
	// changes and no handler runs: the planner's watch missed both, and readiness's drift
	// reports are dropped (none is delivered).
	editedAt := clk.Now()
	edited := h.written(t, h.plan.Releases[0].Name)
	edited.ResourceVersion = "11"
	edited.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"image":{"tag":"hand"},"replicas":2}`)}
	if err := h.c.drift.informer.GetStore().Update(edited.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	gone := h.written(t, h.plan.Releases[1].Name)
	if err := h.c.drift.informer.GetStore().Delete(gone.DeepCopy()); err != nil {
		t.Fatal(err)
	}

	// Short of the resync, the edit and the deletion stand: nothing else checks them.
	clk.Step(DefaultDriftResync - time.Second)
	h.c.checkRuntime("mark-early")
	waitMark(t, marks, "mark-early", "the drift worker to be idle")
	if got := h.pub.IDs(); len(got) != 0 {
		t.Fatalf("published %v before the resync was due, with no event and no report", got)
	}

	// The resync is due: its check forces the edit back and writes the deleted Application
	// again.
	clk.Step(time.Second)
	tick := time.Now()
	wantEdit := repairID(h.plan.Digest(), "11") + "/" + edited.Name
	wantGone := repairID(h.plan.Digest(), "gone-"+string(gone.UID)) + "/" + gone.Name
	servicetest.Eventually(t, 10*time.Second, "the resync to force back "+edited.Name+"'s edit and write "+gone.Name+" again", func() (bool, string) {
		got := h.pub.IDs()
		return len(got) == 2 && got[0] == wantEdit && got[1] == wantGone, "published " + strings.Join(got, ", ")
	})
	wall := time.Since(tick)
	waitMark(t, marks, "mark-resync", "the end of the resync's check") // its mark, not the next one's, below
	for i, s := range h.pub.Sent() {
		cmd, ok := s.Msg.(*bus.ApplyCommand)
		if !ok {
			t.Fatalf("message %s is a %T, want an ApplyCommand", s.ID, s.Msg)
		}
		if cmd.PlanDigest != h.plan.Digest() || cmd.Action != v1alpha1.ActionApply || cmd.Release != h.plan.Releases[i].Name {
			t.Errorf("repair %s writes %s of %s (%s), want %s of the active plan %s (apply)", s.ID, cmd.Release, cmd.PlanDigest, cmd.Action, h.plan.Releases[i].Name, h.plan.Digest())
		}
		took := cmd.Step.Started.Sub(editedAt)
		if took != DefaultDriftResync {
			t.Errorf("repair %s published %s after the change (planner clock), want at the resync, %s", s.ID, took, DefaultDriftResync)
		}
		t.Logf("%s forced back %s after the change by the planner's clock (--drift-resync %s), %s of wall time after the tick", cmd.Release, took, DefaultDriftResync, wall)
	}
	if b := h.basis(t, 0); b == nil || *b != (bus.Basis{UID: string(edited.UID), ResourceVersion: "11", Step: "r-1/1@r-uid"}) {
		t.Errorf("the edit's repair has basis %+v, want the edited Application at version 11", b)
	}

	// The applier writes both: the Events say so then.
	for i, id := range h.pub.IDs() {
		res := &bus.ApplyResult{CommandID: id, Runtime: h.rt.Name, Release: h.plan.Releases[i].Name, Step: bus.StepRef{ID: id[:strings.LastIndexByte(id, '/')]}, Outcome: bus.OutcomeWritten}
		if err := h.c.handleResult(ctx, reportMessage(t, bus.TypeApplyResult, res)); err != nil {
			t.Fatal(err)
		}
	}
	var events []string
	for len(h.rec.Events) > 0 {
		events = append(events, <-h.rec.Events)
	}
	for _, want := range []string{v1alpha1.EventFieldOwnershipOverridden + " Application " + edited.Name, EventApplicationRewritten + " Application " + gone.Name} {
		if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("Events %q once the applier wrote the repairs, want one with %q", events, want)
		}
	}

	// The writes landed, unseen as well: the next resync finds every Application as the plan
	// says and publishes nothing more.
	repaired := h.written(t, edited.Name)
	repaired.ResourceVersion = "12"
	if err := h.c.drift.informer.GetStore().Update(repaired); err != nil {
		t.Fatal(err)
	}
	rewritten := h.written(t, gone.Name)
	rewritten.ResourceVersion, rewritten.UID = "13", types.UID("uid-"+gone.Name+"-2")
	if err := h.c.drift.informer.GetStore().Add(rewritten); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultDriftResync)
	waitMark(t, marks, "mark-resync", "the next resync")
	if got := h.pub.IDs(); len(got) != 2 {
		t.Errorf("published %v at the resync after the repairs landed, want nothing more", got)
	}
}
