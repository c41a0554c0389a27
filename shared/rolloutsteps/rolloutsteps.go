// Package rolloutsteps stores a RuntimeRollout's steps so that the object the planner rewrites
// at every step does not grow with the rollout, and reads the whole list back.
//
// A rollout's status lists only the steps whose state is not recorded elsewhere
// (RuntimeRolloutStatus.Steps). The rest are in immutable ConfigMaps the rollout owns,
// named by RuntimeRolloutStatus.StepRecords: one with every step's definition as created
// (Pending), and numbered batches of the steps that finished, each written once when
// BatchSize finished steps have gathered in the status. Expand puts them together: the
// definitions, then each batch in order, then the status's steps, a later source replacing an
// earlier one's step of the same index.
package rolloutsteps

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// BatchSize is how many finished steps the status holds at most before they are moved into a
// batch ConfigMap. It bounds the rollout's size: at most BatchSize-1 finished steps, plus the
// steps in flight, blocked, awaiting approval or failed. Every status write carries up to
// BatchSize-1 finished steps, and every BatchSize-th step adds a ConfigMap create: at 32 the
// 30-release rollout of make bench wrote a status of 10 KiB on average and took 632 ms of the
// operator's time; at 8, 4 KiB and 548 ms (medians of runs in the same half hour, three at 32
// and seven at 8; step advance p99 45 against 35 ms in one pair of runs). At 4 the creates
// cost what the smaller status saves.
const BatchSize = 8

// Getter reads a ConfigMap.
type Getter func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)

// DefinitionsName is the name of the ConfigMap with r's step definitions. It carries part of the
// rollout's UID: a rollout deleted and created again under its name gets new ConfigMaps, never
// the old one's (which the garbage collector deletes with their owner).
func DefinitionsName(r *v1alpha1.RuntimeRollout) string {
	uid := string(r.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return r.Name + "-steps-" + uid
}

// BatchName is the name of the n-th batch of finished steps (from 1) next to definitions.
func BatchName(definitions string, n int32) string {
	return fmt.Sprintf("%s-%d", definitions, n)
}

// Definition is s as its rollout created it: what it does, Pending, nothing observed.
func Definition(s v1alpha1.Step) v1alpha1.Step {
	return v1alpha1.Step{Index: s.Index, Release: s.Release, Action: s.Action, ReadinessGate: s.ReadinessGate,
		DependsOn: slices.Clone(s.DependsOn), State: v1alpha1.StepPending}
}

// ConfigMap builds the immutable ConfigMap name in namespace holding steps, owned by r.
func ConfigMap(r *v1alpha1.RuntimeRollout, namespace, name string, steps []v1alpha1.Step) (*corev1.ConfigMap, error) {
	raw, err := json.Marshal(steps)
	if err != nil {
		return nil, fmt.Errorf("encode the steps of rollout %s: %w", r.Name, err)
	}
	immutable := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelRole:      v1alpha1.StepsRoleValue,
				v1alpha1.LabelRollout:   r.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "RuntimeRollout", Name: r.Name, UID: r.UID,
			}},
		},
		Immutable: &immutable,
		Data:      map[string]string{v1alpha1.StepsDataKey: string(raw)},
	}, nil
}

// Decode returns the steps cm holds, after checking that it belongs to r (its owner is r's UID).
func Decode(cm *corev1.ConfigMap, r *v1alpha1.RuntimeRollout) ([]v1alpha1.Step, error) {
	owned := false
	for _, o := range cm.OwnerReferences {
		owned = owned || (o.Kind == "RuntimeRollout" && o.UID == r.UID)
	}
	if !owned {
		return nil, fmt.Errorf("ConfigMap %s/%s does not belong to rollout %s (uid %s)", cm.Namespace, cm.Name, r.Name, r.UID)
	}
	raw, ok := cm.Data[v1alpha1.StepsDataKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no key %s", cm.Namespace, cm.Name, v1alpha1.StepsDataKey)
	}
	var steps []v1alpha1.Step
	if err := json.Unmarshal([]byte(raw), &steps); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, v1alpha1.StepsDataKey, err)
	}
	return steps, nil
}

// Expand returns every step of r in index order: r's status steps alone when it has no step
// records, else the definitions, each finished batch and the status's steps put together.
func Expand(ctx context.Context, r *v1alpha1.RuntimeRollout, get Getter) ([]v1alpha1.Step, error) {
	rec := r.Status.StepRecords
	if rec == nil {
		return r.Status.Steps, nil
	}
	read := func(name string) ([]v1alpha1.Step, error) {
		cm, err := get(ctx, rec.Namespace, name)
		if err != nil {
			return nil, fmt.Errorf("rollout %s: read its steps ConfigMap %s/%s: %w", r.Name, rec.Namespace, name, err)
		}
		steps, err := Decode(cm, r)
		if err != nil {
			return nil, fmt.Errorf("rollout %s: %w", r.Name, err)
		}
		return steps, nil
	}
	defs, err := read(rec.Definitions)
	if err != nil {
		return nil, err
	}
	layers := [][]v1alpha1.Step{defs}
	for n := int32(1); n <= rec.FinishedBatches; n++ {
		batch, err := read(BatchName(rec.Definitions, n))
		if err != nil {
			return nil, err
		}
		layers = append(layers, batch)
	}
	return Merge(append(layers, r.Status.Steps)...), nil
}

// Merge puts layers of steps together in index order, a later layer's step replacing an
// earlier one's of the same index. The steps are copied.
func Merge(layers ...[]v1alpha1.Step) []v1alpha1.Step {
	total, top := 0, int32(0)
	for _, layer := range layers {
		for i := range layer {
			total++
			top = max(top, layer[i].Index)
			if layer[i].Index < 1 {
				return mergeSparse(layers)
			}
		}
	}
	if int(top) > 4*total+16 {
		return mergeSparse(layers)
	}
	slots := make([]*v1alpha1.Step, top+1)
	for _, layer := range layers {
		for i := range layer {
			slots[layer[i].Index] = &layer[i]
		}
	}
	n := 0
	for _, p := range slots {
		if p != nil {
			n++
		}
	}
	out := make([]v1alpha1.Step, n)
	k := 0
	for _, p := range slots {
		if p != nil {
			p.DeepCopyInto(&out[k])
			k++
		}
	}
	return out
}

// mergeSparse is Merge for indexes a slice by index cannot hold (hand-edited ones).
func mergeSparse(layers [][]v1alpha1.Step) []v1alpha1.Step {
	byIndex := map[int32]int{}
	var out []v1alpha1.Step
	for _, layer := range layers {
		for i := range layer {
			s := *layer[i].DeepCopy()
			if at, ok := byIndex[s.Index]; ok {
				out[at] = s
				continue
			}
			byIndex[s.Index] = len(out)
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b v1alpha1.Step) int { return int(a.Index - b.Index) })
	return out
}

// StepEqual reports whether a and b are the same step: what equality.Semantic.DeepEqual says
// (a nil and an empty list are equal, times compare as instants), without reflection, which
// the planner would otherwise spend most of a step's CPU on.
func StepEqual(a, b *v1alpha1.Step) bool {
	return a.Index == b.Index && a.Release == b.Release && a.Action == b.Action &&
		a.ReadinessGate == b.ReadinessGate && a.State == b.State && a.Reason == b.Reason &&
		a.Message == b.Message && a.DriftResourceVersion == b.DriftResourceVersion &&
		slices.Equal(a.DependsOn, b.DependsOn) && timeEqual(a.StartedAt, b.StartedAt) &&
		timeEqual(a.FinishedAt, b.FinishedAt) && verdictEqual(a.Verdict, b.Verdict)
}

// StepsEqual is StepEqual over two lists.
func StepsEqual(a, b []v1alpha1.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !StepEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

func verdictEqual(a, b *v1alpha1.Verdict) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Ready == b.Ready && a.ResourceVersion == b.ResourceVersion &&
		timeEqual(a.ObservedAt, b.ObservedAt) && slices.Equal(a.Fences, b.Fences)
}

func timeEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// Count counts steps by state.
func Count(steps []v1alpha1.Step) *v1alpha1.StepCounts {
	c := &v1alpha1.StepCounts{Total: int32(len(steps))} //nolint:gosec // G115: a rollout has one step per release of its plans, far below 2^31
	for i := range steps {
		switch steps[i].State {
		case v1alpha1.StepPending:
			c.Pending++
		case v1alpha1.StepAwaitingApproval:
			c.AwaitingApproval++
		case v1alpha1.StepInProgress:
			c.InProgress++
		case v1alpha1.StepBlocked:
			c.Blocked++
		case v1alpha1.StepSucceeded:
			c.Succeeded++
		case v1alpha1.StepFailed:
			c.Failed++
		}
	}
	return c
}

// Index maps steps by index.
func Index(steps []v1alpha1.Step) map[int32]v1alpha1.Step {
	out := make(map[int32]v1alpha1.Step, len(steps))
	for _, s := range steps {
		out[s.Index] = s
	}
	return out
}

// Split decides what a rollout's status lists, given every step (steps), the definitions and
// the steps the batches written so far hold (recorded): keep is each step that differs from
// both its definition and its recorded copy; finished is those of them that succeeded and no
// batch holds yet, the candidates for the next batch.
func Split(steps []v1alpha1.Step, defs, recorded map[int32]v1alpha1.Step) (keep, finished []v1alpha1.Step) {
	for _, s := range steps {
		rec, isRecorded := recorded[s.Index]
		if isRecorded && StepEqual(&rec, &s) {
			continue
		}
		if def, ok := defs[s.Index]; ok && !isRecorded && StepEqual(&def, &s) {
			continue
		}
		keep = append(keep, s)
		if !isRecorded && s.State == v1alpha1.StepSucceeded {
			finished = append(finished, s)
		}
	}
	return keep, finished
}
