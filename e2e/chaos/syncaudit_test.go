//go:build chaos || e2e

package chaos

import (
	"encoding/json"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// The sync audit, part of the etcd audit (audit_test.go): no step Succeeded before Argo CD
// reported a sync of the spec the step wrote. In etcd's one revision order, every stored
// version of an Application that carries a step's annotation is checked for a report of a sync
// of its spec (syncReported); a forward step whose rollout is stored with it Succeeded must have
// had one at an earlier revision. Readiness's fences ask for more (the refresh, health, no error
// condition); this is what a step may never skip, whatever the fences' code says: the step's
// write reached the cluster. Steps are checked when their rollout's status lists them
// Succeeded (the planner moves finished steps out of it in batches of eight, so a step
// finished in the write that moved a batch is not checked).

// observeSync records whether the version of Application name stored at rev, written by step,
// reports a sync of its spec. Called with the auditor's lock held.
func (a *auditor) observeSync(name, step string, u *unstructured.Unstructured, rev int64) {
	var app argoapp.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &app); err != nil {
		a.violations = append(a.violations, fmt.Sprintf("Application %s at etcd revision %d: cannot decode: %v", name, rev, err))
		return
	}
	if !syncReported(&app) {
		return
	}
	if a.syncs[name] == nil {
		a.syncs[name] = map[string]bool{}
	}
	a.syncs[name][step] = true
}

// checkSucceeded checks every forward step ro's status (stored at rev) lists Succeeded for the
// first time: Argo CD had reported a sync of the spec it wrote. Called with the lock held.
func (a *auditor) checkSucceeded(name string, ro *v1alpha1.RuntimeRollout, rev int64) {
	for _, st := range ro.Status.Steps {
		id := v1alpha1.StepID(name, st.Index)
		if st.State != v1alpha1.StepSucceeded || st.Action == v1alpha1.ActionRemove || a.successes[id] {
			continue
		}
		a.successes[id] = true
		if !a.syncs[st.Release][id] {
			a.violations = append(a.violations, fmt.Sprintf("step %s (%s %s) Succeeded at etcd revision %d, but no stored version of Application %s written by it reported a sync of its spec (%s)",
				id, st.Action, st.Release, rev, st.Release, st.Message))
		}
	}
}

// syncSummary says how many forward steps the sync audit checked.
func (a *auditor) syncSummary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("sync audit: %d forward steps seen Succeeded, each checked for a sync of its spec reported before", len(a.successes))
}

// syncReported reports whether an Application's status, as Argo CD wrote it, shows the spec
// synced: for a readiness gate, aicr-operator's explicit sync of the step that wrote it
// Succeeded (a hook-only chart never syncs by itself); for any other release, a sync of the
// spec Succeeded (its result names the spec's revision and source, values included), or a
// comparison of the spec found the cluster Synced at its revision (nothing left to sync).
func syncReported(app *argoapp.Application) bool {
	spec := app.Spec.Source
	if spec == nil {
		return false
	}
	os := app.Status.OperationState
	if app.Annotations[v1alpha1.AnnotationReadinessGate] == "true" {
		return os != nil && os.Phase == argoapp.OperationSucceeded && os.Operation.InitiatedBy.Username == v1alpha1.FieldManager &&
			appspec.HasStepInfo(os.Operation.Info, v1alpha1.AnnotatedStepToken(app.Annotations))
	}
	if os != nil && os.Phase == argoapp.OperationSucceeded && os.SyncResult != nil &&
		os.SyncResult.Revision == spec.TargetRevision && appspec.EqualSource(&os.SyncResult.Source, spec) {
		return true
	}
	s := app.Status.Sync
	return s.Status == argoapp.SyncStatusCodeSynced && s.Revision == spec.TargetRevision && appspec.EqualSource(&s.ComparedTo.Source, spec)
}

// The sync audit flags a step that Succeeded before any stored version of its Application
// reported a sync of the spec it wrote, and nothing else.
func TestSyncAuditFlagsASuccessBeforeTheSync(t *testing.T) {
	rev := int64(0)
	source := func(v int) map[string]any {
		return map[string]any{"repoURL": "oci://r/charts/a", "path": ".", "targetRevision": "sha256:1", "helm": map[string]any{"valuesObject": map[string]any{"v": v}}}
	}
	// app stores Application a written by step r1/1 with v=1, its status as given.
	app := func(gate bool, status map[string]any) *clientv3.Event {
		rev++
		ann := map[string]any{v1alpha1.AnnotationStep: "r1/1", v1alpha1.AnnotationStepRolloutUID: "uid-r1"}
		if gate {
			ann[v1alpha1.AnnotationReadinessGate] = "true"
		}
		obj := map[string]any{"metadata": map[string]any{"name": "a", "uid": "u1", "annotations": ann},
			"spec": map[string]any{"source": source(1)}, "status": status}
		raw, _ := json.Marshal(obj)
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(applicationsKey + "a"), Value: raw, ModRevision: rev}}
	}
	rollout := func(action v1alpha1.StepAction, state v1alpha1.StepState) *clientv3.Event {
		rev++
		ro := v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r1"}}
		ro.Status.Phase = v1alpha1.PhaseProgressing
		ro.Status.Steps = []v1alpha1.Step{{Index: 1, Release: "a", Action: action, State: state}}
		raw, _ := json.Marshal(ro)
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(rolloutsKey + "r1"), Value: raw, ModRevision: rev}}
	}
	outOfSync := map[string]any{"sync": map[string]any{"status": "OutOfSync", "revision": "sha256:1", "comparedTo": map[string]any{"source": source(1)}}, "health": map[string]any{"status": "Healthy"}}
	synced := map[string]any{"sync": map[string]any{"status": "Synced", "revision": "sha256:1", "comparedTo": map[string]any{"source": source(1)}}}
	earlier := map[string]any{"sync": map[string]any{"status": "Synced", "revision": "sha256:1", "comparedTo": map[string]any{"source": source(0)}},
		"operationState": map[string]any{"phase": "Succeeded", "syncResult": map[string]any{"revision": "sha256:1", "source": source(0)}}}
	ran := map[string]any{"sync": outOfSync["sync"], "operationState": map[string]any{"phase": "Succeeded", "syncResult": map[string]any{"revision": "sha256:1", "source": source(1)}}}
	gateOp := func(user, token, phase string) map[string]any {
		return map[string]any{"sync": synced["sync"], "operationState": map[string]any{"phase": phase,
			"operation": map[string]any{"initiatedBy": map[string]any{"username": user}, "info": []any{map[string]any{"name": "aicr-step", "value": token}}}}}
	}
	tests := map[string]auditorCase{
		"synced, then Succeeded": {events: func() []*clientv3.Event {
			return []*clientv3.Event{app(false, outOfSync), app(false, ran), rollout(v1alpha1.ActionUpgrade, v1alpha1.StepSucceeded)}
		}},
		"compared Synced (nothing to sync), then Succeeded": {events: func() []*clientv3.Event {
			return []*clientv3.Event{app(false, synced), rollout(v1alpha1.ActionUpgrade, v1alpha1.StepSucceeded)}
		}},
		"in flight without a sync": {events: func() []*clientv3.Event {
			return []*clientv3.Event{app(false, outOfSync), rollout(v1alpha1.ActionUpgrade, v1alpha1.StepInProgress)}
		}},
		"a Remove step needs no sync": {events: func() []*clientv3.Event {
			return []*clientv3.Event{app(false, outOfSync), rollout(v1alpha1.ActionRemove, v1alpha1.StepSucceeded)}
		}},
		"Succeeded while Argo CD shows the spec OutOfSync": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{app(false, outOfSync), rollout(v1alpha1.ActionUpgrade, v1alpha1.StepSucceeded), app(false, ran)}
			},
			want: []string{"step r1/1 (Upgrade a) Succeeded at etcd revision 2, but no stored version of Application a written by it reported a sync of its spec"},
		},
		"Succeeded on the sync of the spec before": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{app(false, earlier), rollout(v1alpha1.ActionUpgrade, v1alpha1.StepSucceeded)}
			},
			want: []string{"step r1/1 (Upgrade a) Succeeded"},
		},
		"a gate synced by the step": {events: func() []*clientv3.Event {
			return []*clientv3.Event{app(true, gateOp(v1alpha1.FieldManager, "r1/1@uid-r1", "Succeeded")), rollout(v1alpha1.ActionApply, v1alpha1.StepSucceeded)}
		}},
		"a gate Succeeded on its Synced comparison alone": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{app(true, synced), rollout(v1alpha1.ActionApply, v1alpha1.StepSucceeded)}
			},
			want: []string{"step r1/1 (Apply a) Succeeded"},
		},
		"a gate Succeeded on another step's sync": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{app(true, gateOp(v1alpha1.FieldManager, "r0/1@uid-r0", "Succeeded")), rollout(v1alpha1.ActionApply, v1alpha1.StepSucceeded)}
			},
			want: []string{"step r1/1 (Apply a) Succeeded"},
		},
		"a gate Succeeded while its sync runs": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{app(true, gateOp(v1alpha1.FieldManager, "r1/1@uid-r1", "Running")), rollout(v1alpha1.ActionApply, v1alpha1.StepSucceeded)}
			},
			want: []string{"step r1/1 (Apply a) Succeeded"},
		},
	}
	runAuditorCases(t, "admin", &rev, tests)
}
