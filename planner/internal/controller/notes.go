package controller

import (
	"sort"
	"sync"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// NoteDelay is how long an observation kept as a note (a not-ready verdict, an applier's
// "written": rollout.VerdictNoteOnly, rollout.NoteOnly) waits for a write of its rollout to
// carry it before the runtime's reconcile writes it alone. The step's ready verdict usually
// comes first and makes the note moot, so a step writes its rollout once instead of once per
// observation.
const NoteDelay = time.Second

// notes are observations kept as progress notes, by rollout and by step and kind, until a
// write of the rollout carries them. They change only messages and recorded verdicts: a
// planner that stops before writing them loses nothing the rollout depends on.
type notes struct {
	mu sync.Mutex
	by map[string]map[string]note
}

// note is one kept observation: observe applies it to a rollout.
type note struct {
	observe func(r *v1alpha1.RuntimeRollout)
	at      time.Time
}

// add keeps an observation; a later one of the same key replaces it but keeps the time the
// first was kept, so a stream of not-ready verdicts is still written within NoteDelay.
func (n *notes) add(rollout, key string, nt note) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if prev, ok := n.by[rollout][key]; ok && prev.at.Before(nt.at) {
		nt.at = prev.at
	}
	n.addLocked(rollout, key, nt)
}

func (n *notes) addLocked(rollout, key string, nt note) {
	if n.by == nil {
		n.by = map[string]map[string]note{}
	}
	if n.by[rollout] == nil {
		n.by[rollout] = map[string]note{}
	}
	n.by[rollout][key] = nt
}

// take removes and returns a rollout's notes kept at or before cutoff (all when zero), by
// key, oldest first.
func (n *notes) take(rollout string, cutoff time.Time) map[string]note {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]note{}
	for key, nt := range n.by[rollout] {
		if cutoff.IsZero() || !nt.at.After(cutoff) {
			out[key] = nt
			delete(n.by[rollout], key)
		}
	}
	if len(n.by[rollout]) == 0 {
		delete(n.by, rollout)
	}
	return out
}

// putBack returns notes a failed write did not carry, unless newer ones came meanwhile.
func (n *notes) putBack(rollout string, ns map[string]note) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, nt := range ns {
		if _, newer := n.by[rollout][key]; !newer {
			n.addLocked(rollout, key, nt)
		}
	}
}

// oldest returns when the oldest note of a rollout was kept (zero: none).
func (n *notes) oldest(rollout string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var t time.Time
	for _, nt := range n.by[rollout] {
		if t.IsZero() || nt.at.Before(t) {
			t = nt.at
		}
	}
	return t
}

// apply applies notes to r in the order they were kept.
func applyNotes(r *v1alpha1.RuntimeRollout, ns map[string]note) {
	ordered := make([]note, 0, len(ns))
	for _, nt := range ns {
		ordered = append(ordered, nt)
	}
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].at.Before(ordered[j].at) })
	for _, nt := range ordered {
		nt.observe(r)
	}
}
