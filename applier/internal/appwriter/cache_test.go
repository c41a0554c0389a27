package appwriter

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// snapshotCache is a Cache holding whatever the test put in it: current or stale copies.
type snapshotCache map[string]*argoapp.Application

func (c snapshotCache) Get(name string) (*argoapp.Application, bool) {
	app, ok := c[name]
	return app, ok
}

// cachedHarness is a harness whose writer reads through a snapshotCache, counting its GETs.
func cachedHarness(t *testing.T) (*harness, snapshotCache, *int) {
	t.Helper()
	h := newHarness(t)
	c := snapshotCache{}
	h.w.cache = c
	gets := 0
	h.apps.fail = func(verb string, _ call) error {
		if verb == "get" {
			gets++
		}
		return nil
	}
	return h, c, &gets
}

func TestApplyFromCache(t *testing.T) {
	const name = "gpu-operator"
	tests := map[string]struct {
		// setup prepares the stored Application and the cache.
		setup       func(t *testing.T, h *harness, c snapshotCache)
		wantGets    int
		wantWrites  []string
		wantOutcome string
	}{
		"a current cached Application saves the GET": {
			setup: func(t *testing.T, h *harness, c snapshotCache) {
				c[name] = h.ownedApp(t, name, 1)
			},
			wantWrites:  []string{applyVerb, mergeVerb},
			wantOutcome: bus.OutcomeRefreshed,
		},
		"a stale cached Application costs a conflict and a GET, not a wrong write": {
			setup: func(t *testing.T, h *harness, c snapshotCache) {
				c[name] = h.ownedApp(t, name, 1)
				h.apps.update(name, func(a *argoapp.Application) { a.Status.Health.Status = argoapp.HealthStatusHealthy })
			},
			wantGets:    1,
			wantWrites:  []string{applyVerb, applyVerb, mergeVerb},
			wantOutcome: bus.OutcomeRefreshed,
		},
		"a refusal decided on the cache is decided again on the API server's object": {
			setup: func(t *testing.T, h *harness, c snapshotCache) {
				stale := h.ownedApp(t, name, 1).DeepCopy()
				stale.Annotations[v1alpha1.AnnotationRuntimeUID] = "another-runtime"
				c[name] = stale
			},
			wantGets:    1,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantOutcome: bus.OutcomeRefreshed,
		},
		"a cached Application deleted since is created again, as changed": {
			setup: func(t *testing.T, h *harness, c snapshotCache) {
				c[name] = h.ownedApp(t, name, 1)
				h.apps.remove(name)
			},
			// the apply, held to the cached UID, does not create it; the name is read
			// again and created, as changed
			wantGets:    1,
			wantWrites:  []string{applyVerb, createVerb, mergeVerb, mergeVerb},
			wantOutcome: bus.OutcomeWritten,
		},
		"a name the cache does not hold is read with a GET": {
			setup:       func(t *testing.T, h *harness, c snapshotCache) {},
			wantGets:    1,
			wantWrites:  []string{createVerb, mergeVerb, mergeVerb},
			wantOutcome: bus.OutcomeWritten,
		},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			h, c, gets := cachedHarness(t)
			tc.setup(t, h, c)
			before := map[string]*argoapp.Application{}
			for k, v := range c {
				before[k] = v.DeepCopy()
			}
			*gets = 0
			h.apps.writes()
			res := h.apply(t, applyCmd(h.plan, name, 2))
			if res.Outcome != tc.wantOutcome {
				t.Errorf("outcome %s (%s), want %s", res.Outcome, res.Message, tc.wantOutcome)
			}
			if *gets != tc.wantGets {
				t.Errorf("GETs = %d, want %d", *gets, tc.wantGets)
			}
			if diff := cmp.Diff(tc.wantWrites, verbs(h.apps.writes())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			live := h.apps.live(name)
			if live == nil || live.Annotations[v1alpha1.AnnotationStep] != testRollout+"/2" || ownerEvidence(live, testRuntimeUID) != "" {
				t.Fatalf("stored Application after the write: %+v", live)
			}
			wantStepWrite := v1alpha1.StepWriteUnchanged
			if tc.wantOutcome == bus.OutcomeWritten {
				wantStepWrite = v1alpha1.StepWriteChanged
			}
			if got := live.Annotations[v1alpha1.AnnotationStepWrite]; got != wantStepWrite {
				t.Errorf("step-write %q, want %q", got, wantStepWrite)
			}
			if diff := cmp.Diff(before, map[string]*argoapp.Application(c)); diff != "" {
				t.Errorf("the writer changed a cached object (-before +after):\n%s", diff)
			}
		})
	}
}

// TestApplyFromCacheForeignIsConfirmed: an Application that is foreign in the cache and on the
// API server is refused, after the read that confirms it.
func TestApplyFromCacheForeignIsConfirmed(t *testing.T) {
	h, c, gets := cachedHarness(t)
	c["gpu-operator"] = h.apps.create(&argoapp.Application{ObjectMeta: foreignMeta("gpu-operator")})
	*gets = 0
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
	if res.Outcome != bus.OutcomeForeign || *gets != 1 {
		t.Errorf("outcome %s after %d GETs; want Foreign after 1", res.Outcome, *gets)
	}
	if w := h.apps.writes(); len(w) != 0 {
		t.Errorf("writes to a foreign Application: %v", verbs(w))
	}
}

// TestApplyFromCacheTransientErrorIsReturned: an error other than a conflict on the write
// decided from the cache is the command's error (retried by redelivery), not a fresh attempt.
func TestApplyFromCacheTransientErrorIsReturned(t *testing.T) {
	h, c, _ := cachedHarness(t)
	c["gpu-operator"] = h.ownedApp(t, "gpu-operator", 1)
	h.apps.fail = func(verb string, _ call) error {
		if verb == "patch" {
			return apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return nil
	}
	if _, err := h.w.Apply(context.Background(), applyCmd(h.plan, "gpu-operator", 2)); err == nil || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("Apply = %v; want the API server's error", err)
	}
}

func foreignMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelManagedBy: "someone-else"}}
}

// TestApplyDeletedBetweenReadAndWriteIsChanged: without a cache too, an Application deleted
// between the GET and the apply is not created by the apply (it is held to the UID read): the
// name is read again and created; it is new, so its step-write is changed (readiness then
// waits for a sync of it, not for a refresh).
func TestApplyDeletedBetweenReadAndWriteIsChanged(t *testing.T) {
	h := newHarness(t)
	h.ownedApp(t, "gpu-operator", 1)
	h.apps.before = func(verb string, c call) {
		h.apps.before = nil
		h.apps.remove("gpu-operator")
	}
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
	live := h.apps.live("gpu-operator")
	if res.Outcome != bus.OutcomeWritten || live == nil || live.Annotations[v1alpha1.AnnotationStepWrite] != v1alpha1.StepWriteChanged {
		t.Errorf("outcome %s, stored %+v; want Written and step-write changed", res.Outcome, live)
	}
	if diff := cmp.Diff([]string{applyVerb, createVerb, mergeVerb, mergeVerb}, verbs(h.apps.writes())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// TestApplyFromCacheUnorderedAsksOnlyTheRollout: when the cached Application was last written
// by another rollout's step without an ordering token, the writer asks whether the command's rollout
// ended and, while it runs, writes with the cached copy's resourceVersion: no GET of the
// Application. A stale copy costs a conflict and a fresh decision; an ended rollout is
// confirmed on a fresh read before the command is called Outdated.
func TestApplyFromCacheUnorderedAsksOnlyTheRollout(t *testing.T) {
	const name = "gpu-operator"
	other := func(c *bus.ApplyCommand) {
		c.Step = bus.StepRef{Rollout: "r-other", Index: 1, ID: "r-other/1", Started: testStarted.Add(200 * time.Millisecond)}
		c.Header.ID = "r-other/1/1"
	}
	tests := map[string]struct {
		stale       bool
		ended       bool
		wantGets    int
		wantReads   int
		wantWrites  []string
		wantOutcome string
	}{
		"the command's rollout runs: one rollout read, no GET": {
			wantReads: 1, wantWrites: []string{applyVerb, mergeVerb}, wantOutcome: bus.OutcomeRefreshed,
		},
		"a stale copy: the guarded write conflicts, and the decision is made again": {
			stale: true, wantGets: 1, wantReads: 2, wantWrites: []string{applyVerb, applyVerb, mergeVerb}, wantOutcome: bus.OutcomeRefreshed,
		},
		"the command's rollout ended: confirmed on a fresh read, nothing written": {
			ended: true, wantGets: 1, wantReads: 2, wantOutcome: bus.OutcomeOutdated,
		},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			h, c, gets := cachedHarness(t)
			if res := h.apply(t, applyCmd(h.plan, name, 1, other)); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("the other rollout's write: %s (%s)", res.Outcome, res.Message)
			}
			c[name] = h.apps.live(name)
			if tc.stale {
				h.apps.update(name, func(a *argoapp.Application) { a.Status.Health.Status = argoapp.HealthStatusHealthy })
			}
			if tc.ended {
				h.rollouts.ended[testRollout] = v1alpha1.PhaseFailed
			}
			*gets = 0
			h.rollouts.reads = nil
			h.apps.writes()
			res := h.apply(t, applyCmd(h.plan, name, 2, func(c *bus.ApplyCommand) {
				c.Step.Started = testStarted.Add(700 * time.Millisecond)
			}))
			if res.Outcome != tc.wantOutcome {
				t.Errorf("outcome %s (%s), want %s", res.Outcome, res.Message, tc.wantOutcome)
			}
			if *gets != tc.wantGets || len(h.rollouts.reads) != tc.wantReads {
				t.Errorf("%d GETs of the Application and rollout reads %v; want %d and %d", *gets, h.rollouts.reads, tc.wantGets, tc.wantReads)
			}
			if diff := cmp.Diff(tc.wantWrites, verbs(h.apps.writes())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}
