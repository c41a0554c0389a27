package appspec

// The drift comparison: one live owned Application against what a plan says it must be (Build)
// and against server-side apply's managedFields, classified by the drift kinds the planner acts
// on (bus.Drift*). Readiness reports it and the planner decides from it, so both read an edit
// the same way; the applier's repair makes the Application what Build says, so every field this
// reports is one a repair sets or removes. Pure: objects in, report out.

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
)

// ControllerManager is the field manager of Argo CD's application controller: it owns status
// and never counts as drift.
const ControllerManager = "argocd-application-controller"

// The drift kinds Detect reports: the values of the bus's DriftSource, DriftValues, ...
// (drift_test.go holds them equal). appspec does not import the bus: the kubectl plugin, which
// renders Applications, needs no NATS client.
const (
	DriftSource           = "Source"
	DriftValues           = "Values"
	DriftDestination      = "Destination"
	DriftOther            = "Other"
	DriftAutoSyncDisabled = "AutoSyncDisabled"
	DriftFinalizerAdded   = "FinalizerAdded"
)

// Drift is the drift of one Application. Empty Kinds means none.
type Drift struct {
	// Kinds are the Drift* kinds, sorted.
	Kinds []string
	// Fields are the differing field paths (".spec.source.targetRevision"), sorted.
	Fields []string
	// Managers are the field managers that now own fields the operator applied, sorted.
	Managers []string
}

// Empty reports whether there is no drift.
func (r Drift) Empty() bool { return len(r.Kinds) == 0 }

// Equal reports whether two reports say the same.
func (r Drift) Equal(o Drift) bool {
	return slices.Equal(r.Kinds, o.Kinds) && slices.Equal(r.Fields, o.Fields) && slices.Equal(r.Managers, o.Managers)
}

// PlanDecidedAnnotations are the annotations a plan and the step that wrote it decide, the one
// list drift detection and the repair share: an edit of any of them is drift (Other), and a
// repair writes every one of them back. The step annotations (StepAnnotations) and
// step-write, which no reader can know the value of, count as edited when another manager took
// them over from the operator's apply (managedFields); the others are compared by value too.
var PlanDecidedAnnotations = []string{
	v1alpha1.AnnotationRuntimeUID,
	v1alpha1.AnnotationPlanDigest,
	v1alpha1.AnnotationReleaseID,
	v1alpha1.AnnotationDependsOn,
	v1alpha1.AnnotationReadinessGate,
	v1alpha1.AnnotationStep,
	v1alpha1.AnnotationStepStarted,
	v1alpha1.AnnotationStepRolloutUID,
	v1alpha1.AnnotationStepSeq,
	v1alpha1.AnnotationStepWrite,
}

// StepAnnotations are the plan-decided annotations Build is given from the step that writes:
// a comparer (readiness, the planner) gives Build the live values, so they are never compared
// by value, only by who owns them. The engine-suspended marker is informational: Build is given
// no suspension by a comparer (see classify), so it is not compared either.
var StepAnnotations = []string{
	v1alpha1.AnnotationStep,
	v1alpha1.AnnotationStepStarted,
	v1alpha1.AnnotationStepRolloutUID,
	v1alpha1.AnnotationStepSeq,
	v1alpha1.AnnotationStepWrite,
}

// notByValue are the annotations Detect does not compare by value.
var notByValue = func() map[string]bool {
	m := map[string]bool{v1alpha1.AnnotationEngineSuspended: true}
	for _, k := range StepAnnotations {
		m[k] = true
	}
	return m
}()

// planDecided is PlanDecidedAnnotations as a set.
var planDecided = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range PlanDecidedAnnotations {
		m[k] = true
	}
	return m
}()

// operatorManager reports whether a field manager is the operator's (its apply and patches,
// and the Remove step's own manager) or Argo CD's controller, whose fields are never drift.
func operatorManager(m string) bool {
	return m == v1alpha1.FieldManager || strings.HasPrefix(m, v1alpha1.FieldManager+"-") || m == ControllerManager
}

// Detect compares live with desired, the Application Build renders for it. The spec compares
// whole: a field desired does not state (an added spec.sources, source.chart) is drift as much
// as one that differs. The caller does not ask about an Application under a Remove step (its
// delete-rollout marker checked against the rollout it names); a marker Detect sees is
// therefore not the operator's, and is Other drift like any other annotation the operator does
// not write. Each plan-decided annotation (PlanDecidedAnnotations) is drift when it differs from
// desired's (StepAnnotations excepted: desired holds the live ones), or when another manager
// took it over from the operator's apply.
func Detect(live, desired *argoapp.Application) Drift {
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
			add(DriftOther, ".metadata.labels."+k)
		}
	}
	for k, want := range desired.Annotations {
		if notByValue[k] {
			continue
		}
		if got, ok := live.Annotations[k]; !ok || got != want {
			add(DriftOther, ".metadata.annotations."+k)
		}
	}
	for _, k := range PlanDecidedAnnotations {
		if _, stated := desired.Annotations[k]; !stated && !notByValue[k] {
			if _, ok := live.Annotations[k]; ok {
				add(DriftOther, annotationsPath+k) // one the plan does not state, added
			}
		}
	}
	if _, marked := live.Annotations[v1alpha1.AnnotationDeleteRollout]; marked {
		add(DriftOther, ".metadata.annotations."+v1alpha1.AnnotationDeleteRollout)
	}
	if slices.Contains(live.Finalizers, v1alpha1.ArgoResourcesFinalizer) {
		add(DriftFinalizerAdded, ".metadata.finalizers")
	}
	managers := map[string]bool{}
	annotated := keys(fields) // the annotation paths that differ by value, and the spec's
	for _, t := range takenOver(live, desired) {
		if key, ok := strings.CutPrefix(t.path, annotationsPath); ok {
			// A step annotation has no value to compare: taken over is edited. Another
			// plan-decided one counts when its value differs, as a spec field does.
			if notByValue[key] || touches(t.path, annotated) {
				managers[t.manager] = true
				add(DriftOther, t.path)
			}
			continue
		}
		if !touches(t.path, diffs) {
			// Another manager holds the field with the value the operator wrote: an edit undone
			// by hand. The spec is as written, so it is no drift (else a rollout stalled on
			// InventoryDrift could never go on), and the operator's next apply takes it back.
			continue
		}
		managers[t.manager] = true
		add(classify(t.path, live), t.path)
	}
	return Drift{Kinds: keys(kinds), Fields: keys(fields), Managers: keys(managers)}
}

// annotationsPath prefixes the field path of an annotation.
const annotationsPath = ".metadata.annotations."

// TakenOver reports whether another field manager took a plan-decided annotation over from the
// operator's apply: someone else owns it and the operator's apply no longer does.
func TakenOver(live *argoapp.Application, annotation string) bool {
	path := annotationsPath + annotation
	ours, theirs := false, false
	for _, e := range live.ManagedFields {
		switch {
		case e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply:
			ours = ours || fieldLeaves(e.FieldsV1)[path]
		case operatorManager(e.Manager):
		default:
			theirs = theirs || fieldLeaves(e.FieldsV1)[path]
		}
	}
	return theirs && !ours
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
		return DriftValues
	case under(path, ".spec.source"), under(path, ".spec.sources"):
		return DriftSource
	case under(path, ".spec.destination"):
		return DriftDestination
	case under(path, ".spec.syncPolicy.automated.enabled"), path == ".spec.syncPolicy.automated", path == ".spec.syncPolicy":
		// Whatever the engine-suspended annotation says: a marker anyone can set is not
		// proof. Whether the engine is suspended is the runtime's spec, which the planner reads.
		if !automated(live) {
			return DriftAutoSyncDisabled
		}
	}
	return DriftOther
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
// field owned by both (the same value applied twice) is not drift. The fields are the spec's
// and the plan-decided annotations' (the operator's apply states every one of them).
func takenOver(live, desired *argoapp.Application) []takeover {
	var ours map[string]bool
	var others []metav1.ManagedFieldsEntry
	for _, e := range live.ManagedFields {
		switch {
		case e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply:
			ours = fieldLeaves(e.FieldsV1)
		case operatorManager(e.Manager):
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
	for _, k := range PlanDecidedAnnotations {
		applied[annotationsPath+k] = true
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

// fieldLeaves lists the leaf field paths of a FieldsV1 set under spec (".spec.source.repoURL")
// and its plan-decided annotations (".metadata.annotations.operator.aicr.run/step"). Only named
// fields ("f:") are followed; a list element key ends the path at the list.
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
	meta, _ := set["f:metadata"].(map[string]any)
	annotations, _ := meta["f:annotations"].(map[string]any)
	for k := range annotations {
		if key := strings.TrimPrefix(k, "f:"); planDecided[key] {
			out[annotationsPath+key] = true
		}
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

// TrimManagedFields returns the managedFields entries Detect reads, each cut to the part it
// reads (f:spec and the plan-decided annotations), for a cache of many Applications: the
// entries of Argo CD's controller (it owns status) and of the operator's updates and other
// managers (refresh annotation, operation, the Remove step's marker) are dropped; the
// operator's apply and every other manager's entries stay. A manager that created the
// Application with its status would otherwise keep every status.resources entry alive. A new
// slice: reusing the old one would keep the dropped entries reachable. nil stays nil.
func TrimManagedFields(in []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(in) == 0 {
		return in
	}
	var kept []metav1.ManagedFieldsEntry
	for _, e := range in {
		if operatorManager(e.Manager) && (e.Manager != v1alpha1.FieldManager || e.Operation != metav1.ManagedFieldsOperationApply) {
			continue
		}
		e.FieldsV1 = driftFields(e.FieldsV1)
		kept = append(kept, e)
	}
	return kept
}

// driftFields keeps of a field set only f:spec and the plan-decided annotations.
func driftFields(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil {
		return nil
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(f.Raw, &set); err != nil {
		return f
	}
	out := map[string]any{}
	if spec, ok := set["f:spec"]; ok {
		out["f:spec"] = spec
	}
	var meta struct {
		Annotations map[string]json.RawMessage `json:"f:annotations"`
	}
	if raw, ok := set["f:metadata"]; ok && json.Unmarshal(raw, &meta) == nil {
		kept := map[string]json.RawMessage{}
		for k, v := range meta.Annotations {
			if planDecided[strings.TrimPrefix(k, "f:")] {
				kept[k] = v
			}
		}
		if len(kept) > 0 {
			out["f:metadata"] = map[string]any{"f:annotations": kept}
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return f
	}
	return &metav1.FieldsV1{Raw: raw}
}
