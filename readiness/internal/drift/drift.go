// Package drift compares a live owned Application with what the operator wrote (appspec.Build of
// the plan it names) and with server-side apply's managedFields, and classifies the difference
// by the drift kinds the planner acts on (bus.Drift*). It is pure: objects in, report out.
package drift

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// ControllerManager is the field manager of Argo CD's application controller: it owns status
// and never counts as drift.
const ControllerManager = "argocd-application-controller"

// Report is the drift of one Application. Empty Kinds means none.
type Report struct {
	// Kinds are bus.Drift* constants, sorted.
	Kinds []string
	// Fields are the differing field paths (".spec.source.targetRevision"), sorted.
	Fields []string
	// Managers are the field managers that now own fields the operator applied, sorted.
	Managers []string
}

// Empty reports whether there is no drift.
func (r Report) Empty() bool { return len(r.Kinds) == 0 }

// Equal reports whether two reports say the same.
func (r Report) Equal(o Report) bool {
	return slices.Equal(r.Kinds, o.Kinds) && slices.Equal(r.Fields, o.Fields) && slices.Equal(r.Managers, o.Managers)
}

// annotationsFromLive are annotations Build is given from the live object itself (the step that
// wrote it, the ownership proof, the plan): comparing them would compare the object with itself.
// The engine-suspended marker is informational: Build is given no suspension (see classify).
var annotationsFromLive = map[string]bool{
	v1alpha1.AnnotationRuntimeUID:      true,
	v1alpha1.AnnotationPlanDigest:      true,
	v1alpha1.AnnotationStep:            true,
	v1alpha1.AnnotationStepStarted:     true,
	v1alpha1.AnnotationStepRolloutUID:  true,
	v1alpha1.AnnotationEngineSuspended: true,
}

// Detect compares live with desired, the Application appspec.Build renders for it. The caller
// does not ask about an Application under a Remove step (its delete-rollout marker checked
// against the rollout it names: package removal); a marker Detect sees is therefore not the
// operator's, and is Other drift like any other annotation the operator does not write.
func Detect(live, desired *argoapp.Application) Report {
	kinds := map[string]bool{}
	fields := map[string]bool{}
	add := func(kind, field string) {
		kinds[kind] = true
		fields[field] = true
	}
	diffs := diffPaths(".spec", toJSON(desired.Spec), toJSON(live.Spec))
	for _, p := range diffs {
		add(classify(p, live), p)
	}
	for k, want := range desired.Labels {
		if got, ok := live.Labels[k]; !ok || got != want {
			add(bus.DriftOther, ".metadata.labels."+k)
		}
	}
	for k, want := range desired.Annotations {
		if annotationsFromLive[k] {
			continue
		}
		if got, ok := live.Annotations[k]; !ok || got != want {
			add(bus.DriftOther, ".metadata.annotations."+k)
		}
	}
	if _, marked := live.Annotations[v1alpha1.AnnotationDeleteRollout]; marked {
		add(bus.DriftOther, ".metadata.annotations."+v1alpha1.AnnotationDeleteRollout)
	}
	if slices.Contains(live.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		add(bus.DriftFinalizerAdded, ".metadata.finalizers")
	}
	managers := map[string]bool{}
	for _, t := range takenOver(live, desired) {
		if !touches(t.path, diffs) {
			// Another manager holds the field with the value the operator wrote: an edit undone
			// by hand. The spec is as written, so it is no drift (else a rollout stalled on
			// InventoryDrift could never go on), and the operator's next apply takes it back.
			continue
		}
		managers[t.manager] = true
		add(classify(t.path, live), t.path)
	}
	return Report{Kinds: keys(kinds), Fields: keys(fields), Managers: keys(managers)}
}

// touches reports whether path is one of paths, or inside or above one of them.
func touches(path string, paths []string) bool {
	for _, p := range paths {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// classify names the kind of a differing field path.
func classify(path string, live *argoapp.Application) string {
	switch {
	case under(path, ".spec.source.helm.valuesObject"):
		return bus.DriftValues
	case under(path, ".spec.source"), under(path, ".spec.sources"):
		return bus.DriftSource
	case under(path, ".spec.destination"):
		return bus.DriftDestination
	case under(path, ".spec.syncPolicy.automated.enabled"), path == ".spec.syncPolicy.automated", path == ".spec.syncPolicy":
		// Whatever the engine-suspended annotation says: a marker anyone can set is not
		// proof. Whether the engine is suspended is the runtime's spec, which the planner reads.
		if !automated(live) {
			return bus.DriftAutoSyncDisabled
		}
	}
	return bus.DriftOther
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+".")
}

func automated(app *argoapp.Application) bool {
	sp := app.Spec.SyncPolicy
	if sp == nil || sp.Automated == nil {
		return false
	}
	return sp.Automated.Enabled == nil || *sp.Automated.Enabled
}

func toJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unencodable: %v", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Sprintf("undecodable: %v", err)
	}
	return out
}

// diffPaths lists the paths where two decoded JSON values differ: maps are walked key by key,
// anything else (lists included: the Application CRD's lists are atomic) compares whole.
func diffPaths(path string, want, got any) []string {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if !wok || !gok {
		if reflect.DeepEqual(want, got) {
			return nil
		}
		return []string{path}
	}
	var out []string
	for k, wv := range wm {
		out = append(out, diffPaths(path+"."+k, wv, gm[k])...)
	}
	for k, gv := range gm {
		if _, ok := wm[k]; !ok {
			out = append(out, diffPaths(path+"."+k, nil, gv)...)
		}
	}
	return out
}

type takeover struct{ manager, path string }

// takenOver lists fields the operator applies that another manager now owns and the operator no
// longer does: what a forced apply or an update by someone else leaves in managedFields. A
// field owned by both (the same value applied twice) is not drift.
func takenOver(live, desired *argoapp.Application) []takeover {
	var ours map[string]bool
	var others []metav1.ManagedFieldsEntry
	for _, e := range live.ManagedFields {
		switch {
		case e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply:
			ours = fieldLeaves(e.FieldsV1)
		case e.Manager == v1alpha1.FieldManager, e.Manager == ControllerManager:
		default:
			others = append(others, e)
		}
	}
	if ours == nil || len(others) == 0 {
		return nil
	}
	applied := map[string]bool{}
	for _, p := range jsonLeaves(".spec", toJSON(desired.Spec)) {
		applied[p] = true
	}
	var out []takeover
	for _, e := range others {
		for p := range fieldLeaves(e.FieldsV1) {
			if ours[p] || !coveredBy(p, applied) {
				continue
			}
			out = append(out, takeover{manager: e.Manager, path: p})
		}
	}
	return out
}

// coveredBy reports whether path is one of the applied leaves, or inside or above one.
func coveredBy(path string, applied map[string]bool) bool {
	if applied[path] {
		return true
	}
	for a := range applied {
		if strings.HasPrefix(a, path+".") || strings.HasPrefix(path, a+".") {
			return true
		}
	}
	return false
}

// fieldLeaves lists the leaf field paths of a FieldsV1 set under spec (".spec.source.repoURL").
// Only named fields ("f:") are followed; a list element key ends the path at the list.
func fieldLeaves(f *metav1.FieldsV1) map[string]bool {
	out := map[string]bool{}
	if f == nil {
		return out
	}
	var set map[string]any
	if err := json.Unmarshal(f.Raw, &set); err != nil {
		return out
	}
	var walk func(path string, m map[string]any)
	walk = func(path string, m map[string]any) {
		leaf := true
		for k, v := range m {
			if !strings.HasPrefix(k, "f:") {
				continue
			}
			leaf = false
			child, _ := v.(map[string]any)
			walk(path+"."+strings.TrimPrefix(k, "f:"), child)
		}
		if leaf && path != "" {
			out[path] = true
		}
	}
	if spec, ok := set["f:spec"].(map[string]any); ok {
		walk(".spec", spec)
	}
	return out
}

func jsonLeaves(path string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{path}
	}
	var out []string
	for k, c := range m {
		out = append(out, jsonLeaves(path+"."+k, c)...)
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
