//go:build chaos || e2e

package chaos

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// The etcd audit flags what the chaos test is there to catch, and nothing else.
func TestAuditorFlagsRewritesRegressionsAndDeletes(t *testing.T) {
	const admin = "admin"
	rev := int64(0)
	app := func(name, uid, step string, v int, annotations map[string]any, deleting bool) *clientv3.Event {
		rev++
		ann := map[string]any{v1alpha1.AnnotationStep: step}
		maps.Copy(ann, annotations)
		meta := map[string]any{"name": name, "uid": uid, "annotations": ann}
		if deleting {
			meta["deletionTimestamp"] = "2026-01-02T03:04:05Z"
		}
		obj := map[string]any{"metadata": meta,
			"spec": map[string]any{"source": map[string]any{"helm": map[string]any{"valuesObject": map[string]any{"v": v}}}}}
		raw, _ := json.Marshal(obj)
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(applicationsKey + name), Value: raw, ModRevision: rev}}
	}
	put := func(name, step string, v int) *clientv3.Event { return app(name, "u1", step, v, nil, false) }
	marked := func(name, uid, rollout string) *clientv3.Event {
		return app(name, uid, "r1/1", 1, map[string]any{v1alpha1.AnnotationDeleteRollout: rollout}, true)
	}
	del := func(name, uid, rollout string) *clientv3.Event {
		ev := marked(name, uid, rollout)
		return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: ev.Kv.Key, ModRevision: ev.Kv.ModRevision}, PrevKv: ev.Kv}
	}
	rollout := func(name, approvedBy string, removeState v1alpha1.StepState) *clientv3.Event {
		rev++
		ro := v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if approvedBy != "" {
			ro.Spec.Approval = &v1alpha1.Approval{ApprovedBy: approvedBy, Reason: "r"}
		}
		ro.Status.Phase = v1alpha1.PhaseProgressing
		ro.Status.Steps = []v1alpha1.Step{{Index: 1, Release: "a", Action: v1alpha1.ActionRemove, State: removeState}}
		raw, _ := json.Marshal(ro)
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(rolloutsKey + name), Value: raw, ModRevision: rev}}
	}
	tests := map[string]auditorCase{
		"steps moving forward, each rewritten with its own spec (redelivery, status writes)": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), put("a", "r1/1", 1), put("a", "r2/1", 2), put("b", "r2/2", 1), put("a", "r2/1", 2)}
			},
		},
		"a step written again with other values": {
			events: func() []*clientv3.Event { return []*clientv3.Event{put("a", "r1/1", 1), put("a", "r1/1", 2)} },
			want:   []string{"written twice under step r1/1 with different specs"},
		},
		"a stale command of an earlier rollout writing again": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), put("a", "r2/1", 2), put("a", "r1/1", 1)}
			},
			want: []string{"went back to step r1/1 after r2/1"},
		},
		"an approved Remove deletes, and a namesake installed later is a new Application": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), rollout("r2", admin, v1alpha1.StepAwaitingApproval), rollout("r2", admin, v1alpha1.StepInProgress),
					marked("a", "u1", "r2"), del("a", "u1", "r2"), app("a", "u2", "r3/1", 3, nil, false)}
			},
		},
		"a deletion without the Remove's mark": {
			events: func() []*clientv3.Event { return []*clientv3.Event{put("a", "r1/1", 1), del("a", "u1", "")} },
			want:   []string{"was deleted at etcd revision 2 without operator.aicr.run/delete-rollout"},
		},
		"a deletion for a rollout nobody approved": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), rollout("r2", "", v1alpha1.StepInProgress), marked("a", "u1", "r2")}
			},
			want: []string{"for rollout r2, which admin had not approved"},
		},
		"a deletion approved by someone else than the person": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), rollout("r2", "system:serviceaccount:aicr-system:aicr-operator-planner", v1alpha1.StepInProgress), marked("a", "u1", "r2")}
			},
			want: []string{"which admin had not approved"},
		},
		"a deletion before the Remove step started": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), rollout("r2", admin, v1alpha1.StepAwaitingApproval), marked("a", "u1", "r2")}
			},
			want: []string{"whose Remove step of a had not started"},
		},
		"a Remove deleting a namesake created after it started": {
			events: func() []*clientv3.Event {
				return []*clientv3.Event{put("a", "r1/1", 1), rollout("r2", admin, v1alpha1.StepInProgress), marked("a", "u1", "r2"), del("a", "u1", "r2"),
					app("a", "u2", "r3/1", 3, nil, false), marked("a", "u2", "r2")}
			},
			want: []string{"the Remove step of a in rollout r2 (started at etcd revision 2) deleted a recreated namesake: UID u2, stored at revision 5"},
		},
	}
	runAuditorCases(t, admin, &rev, tests)
}

// A rollout progresses when its phase or a step's state changes, not on every write.
func TestAuditorRecordsRolloutProgress(t *testing.T) {
	a := newAuditor("admin")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(at time.Duration, phase v1alpha1.RolloutPhase, state v1alpha1.StepState, msg string) {
		ro := v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
		ro.Status.Phase = phase
		ro.Status.Steps = []v1alpha1.Step{{Index: 1, Release: "a", Action: v1alpha1.ActionRemove, State: state, Message: msg}}
		raw, _ := json.Marshal(ro)
		a.observe(&clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(rolloutsKey + "r"), Value: raw}}, t0.Add(at))
	}
	write(0, v1alpha1.PhaseAwaitingApproval, v1alpha1.StepAwaitingApproval, "")
	write(time.Second, v1alpha1.PhaseAwaitingApproval, v1alpha1.StepAwaitingApproval, "a note: not progress")
	write(3*time.Second, v1alpha1.PhaseProgressing, v1alpha1.StepInProgress, "")
	write(4*time.Second, v1alpha1.PhaseSucceeded, v1alpha1.StepSucceeded, "")
	want := []progressEvent{{at: t0, waiting: true, what: "r AwaitingApproval,AwaitingApproval"},
		{at: t0.Add(3 * time.Second), what: "r Progressing,InProgress"}, {at: t0.Add(4 * time.Second), what: "r Succeeded,Succeeded"}}
	if diff := cmp.Diff(want, a.progressEvents(), cmp.AllowUnexported(progressEvent{})); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// The stall of a fault is the longest span without progress from its ref to its end, inside a
// rollout and not while one waits for approval.
func TestStallOf(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	s := time.Second
	progress := []progressEvent{{at: at(1 * s)}, {at: at(2 * s)}, {at: at(6 * s)}, {at: at(7 * s), waiting: true}, {at: at(12 * s)}, {at: at(13 * s)}}
	windows := [][2]time.Time{{at(0), at(13 * s)}, {at(20 * s), at(30 * s)}}
	tests := map[string]struct {
		ref, restored time.Duration
		until         time.Duration // the next fault, 0 for none
		want          time.Duration
		measured, cut bool
	}{
		"a kill whose process is back at once: the gap it fell in, from the kill": {ref: 3 * s, restored: 3 * s, want: 3 * s, measured: true},
		"a fault spanning two gaps: the longer":                                   {ref: 1500 * time.Millisecond, restored: 3 * s, want: 4 * s, measured: true},
		"a singleton's fault: counted from when it ended":                         {ref: 5 * s, restored: 5 * s, want: s, measured: true},
		"waiting for the approval is no stall":                                    {ref: 8 * s, restored: 9 * s, measured: false},
		"between rollouts":                                                        {ref: 15 * s, restored: 16 * s, measured: false},
		"a rollout's start counts as progress":                                    {ref: 20 * s, restored: 21 * s, measured: false},
		"the next fault cuts it: a lower bound":                                   {ref: 3 * s, restored: 3 * s, until: 4 * s, want: s, measured: true, cut: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fault{ref: at(tc.ref), restored: at(tc.restored)}
			until := time.Time{}
			if tc.until > 0 {
				until = at(tc.until)
			}
			got := stallOf(f, progress, windows, until)
			if got.measured != tc.measured || got.d != tc.want || got.cut != tc.cut {
				t.Errorf("stallOf = %s, %v, cut %v; want %s, %v, cut %v", got.d, got.measured, got.cut, tc.want, tc.measured, tc.cut)
			}
			if got.measured && got.to.Sub(got.from) != got.d {
				t.Errorf("stallOf spans %s-%s, not its %s", got.from, got.to, got.d)
			}
		})
	}
}

// A write of a leader-elected process counts only while it holds the lease: a woken leader
// writing after a hand-over is flagged, a write around the hand-over is not.
func TestLeaseViolation(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := []leaseRecord{{holder: "planner-0", acquired: t0}, {holder: "planner-1", acquired: t0.Add(10 * time.Second)}}
	tests := map[string]struct {
		instance string
		at       time.Duration
		want     string
	}{
		"the leader writes":                   {"planner-0", 5 * time.Second, ""},
		"the new leader writes":               {"planner-1", 11 * time.Second, ""},
		"the old leader writes after":         {"planner-0", 12 * time.Second, "planner-1 had acquired it"},
		"the old leader writes at the change": {"planner-0", 10*time.Second + 100*time.Millisecond, ""},
		"the new leader writes just before":   {"planner-1", 10*time.Second - 100*time.Millisecond, ""},
		"a standby writes":                    {"planner-1", 5 * time.Second, "planner-0 had acquired it"},
		"a write before any leader":           {"planner-0", -5 * time.Second, "nobody had acquired"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := leaseViolation(recs, tc.instance, t0.Add(tc.at))
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("leaseViolation = %q, want %q", got, tc.want)
			}
		})
	}
}

// The log scan finds panics, races, fatal errors and dropped messages, and nothing in ordinary
// lines.
func TestScanLogsFindsPanicsRacesAndDrops(t *testing.T) {
	dir := t.TempDir()
	logs := map[string]string{
		"applier-0.log": `{"level":"info","msg":"publish result"}` + "\n" +
			`{"level":"warn","error":"handler panic: runtime error: index out of range","msg":"handle message, will retry"}` + "\n",
		"planner-1.log":      "planner: lost leadership of lease aicr-system/aicr-planner\n",
		"readiness-0.log":    "WARNING: DATA RACE\nRead at 0x00c000 by goroutine 7:\n",
		"nats-0.log":         "[INF] Server is ready\n",
		"applier-1.log":      `{"level":"error","error":"decode aicr.v1.ApplyCommand: unexpected end","msg":"drop message"}` + "\n",
		"kube-apiserver.log": "E0102 03:04:05.000000 1 runtime.go:79] Observed a panic: boom\n",
		"admission-0.log":    "panic: assignment to entry in nil map\n\ngoroutine 1 [running]:\n",
		"etcd.log":           `{"level":"info","msg":"panicking is not what this line does"}` + "\n",
	}
	for name, body := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, lines, files, err := scanLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"panic: assignment to entry in nil map",
		"handler panic (recovered) in applier-0.log:2",
		"message dropped for good in applier-1.log:1",
		"panic (recovered) in kube-apiserver.log:1",
		"data race in readiness-0.log:1",
	}
	if len(got) != len(want) {
		t.Fatalf("findings %q, want %d matching %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("finding %d = %q, want it to contain %q", i, got[i], w)
		}
	}
	if lines != 12 || files != len(logs) {
		t.Errorf("%d lines of %d logs read, want 12 of %d", lines, files, len(logs))
	}
}

// The expected steps of a move: Install, Remove and Upgrade as the values say, Apply for a gate
// above any of them.
func TestExpectedActions(t *testing.T) {
	from := initial()
	to := state{version: 1, values: maps.Clone(from.values)}
	to.values["base-c"] = 2 // below gate-k through mid-f and top-i
	delete(to.values, "leaf-l")
	back := state{version: 2, values: maps.Clone(to.values)}
	back.values["leaf-l"] = 3
	tests := map[string]struct {
		from, to state
		want     map[string]v1alpha1.StepAction
	}{
		"an upgrade and a removal": {from, to, map[string]v1alpha1.StepAction{"base-c": v1alpha1.ActionUpgrade, "gate-k": v1alpha1.ActionApply, "leaf-l": v1alpha1.ActionRemove}},
		"a release back":           {to, back, map[string]v1alpha1.StepAction{"leaf-l": v1alpha1.ActionInstall}},
		"the install": {state{version: -1}, from, func() map[string]v1alpha1.StepAction {
			out := map[string]v1alpha1.StepAction{}
			for _, r := range releases {
				out[r.name] = v1alpha1.ActionInstall
			}
			return out
		}()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, expectedActions(tc.from, tc.to)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// Nearest-rank percentiles of the stall report.
func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 0.5); got != 100*time.Millisecond {
		t.Errorf("p50 = %s, want 100ms", got)
	}
	if got := percentile(ds, 0.99); got != 198*time.Millisecond {
		t.Errorf("p99 = %s, want 198ms", got)
	}
	if got := percentile(ds[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one = %s, want 1ms", got)
	}
}

// The fake Argo CD shows a written spec compared, synced and healthy, runs an operation, answers
// a refresh, and leaves a readiness gate's spec change to an explicit operation.
func TestFakeArgoCDWritesTheRecordedStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := map[string]any{"repoURL": "oci://r/charts/a", "path": ".", "targetRevision": "sha256:1", "helm": map[string]any{"valuesObject": map[string]any{"v": int64(2)}}}
	dest := map[string]any{"server": "https://kubernetes.default.svc", "namespace": "ns"}
	app := func(annotations map[string]any, status map[string]any, op map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "a", "resourceVersion": "7", "annotations": annotations},
			"spec":     map[string]any{"source": src, "destination": dest},
		}}
		if status != nil {
			u.Object["status"] = status
		}
		if op != nil {
			u.Object["operation"] = op
		}
		return u
	}
	result := map[string]any{"revision": "sha256:1", "source": src}
	settled := func(opState map[string]any) map[string]any {
		st := map[string]any{
			"sync":   map[string]any{"status": "Synced", "revision": "sha256:1", "comparedTo": map[string]any{"source": src, "destination": dest}},
			"health": map[string]any{"status": "Healthy", "lastTransitionTime": "2026-01-02T03:04:05Z"}, "reconciledAt": "2026-01-02T03:04:05Z",
			"sourceType": "Helm", "controllerNamespace": "argocd",
		}
		if opState != nil {
			st["operationState"] = opState
		}
		return st
	}
	auto := map[string]any{"operation": map[string]any{"sync": map[string]any{"revision": "sha256:1", "prune": true}, "initiatedBy": map[string]any{"automated": true}},
		"phase": "Succeeded", "message": "successfully synced (all tasks run)", "syncResult": result, "startedAt": "2026-01-02T03:04:05Z", "finishedAt": "2026-01-02T03:04:05Z"}
	ours := map[string]any{"sync": map[string]any{"revision": "sha256:1"}, "initiatedBy": map[string]any{"username": "aicr-operator"}}
	ran := map[string]any{"operation": ours, "phase": "Succeeded", "message": "successfully synced (all tasks run)", "syncResult": result,
		"startedAt": "2026-01-02T03:04:05Z", "finishedAt": "2026-01-02T03:04:05Z"}
	rv := map[string]any{"op": "replace", "path": "/metadata/resourceVersion", "value": "7"}
	tests := map[string]struct {
		app  *unstructured.Unstructured
		want []map[string]any
	}{
		"a new Application is compared and auto-synced": {
			app:  app(nil, nil, nil),
			want: []map[string]any{rv, {"op": "add", "path": "/status", "value": settled(auto)}},
		},
		"a settled Application is left alone": {
			app: app(nil, settled(auto), nil),
		},
		"a refresh request is answered by removing the annotation": {
			app: app(map[string]any{v1alpha1.AnnotationArgoRefresh: "normal"}, settled(auto), nil),
			want: []map[string]any{rv, {"op": "add", "path": "/status", "value": settled(auto)},
				{"op": "remove", "path": "/metadata/annotations/argocd.argoproj.io~1refresh"}},
		},
		"an operation runs and is cleared": {
			app:  app(map[string]any{v1alpha1.AnnotationReadinessGate: "true"}, settled(nil), ours),
			want: []map[string]any{rv, {"op": "add", "path": "/status", "value": settled(ran)}, {"op": "remove", "path": "/operation"}},
		},
		"a gate's spec change is compared but not synced": {
			app:  app(map[string]any{v1alpha1.AnnotationReadinessGate: "true"}, nil, nil),
			want: []map[string]any{rv, {"op": "add", "path": "/status", "value": settled(nil)}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := desiredPatch(tc.app, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// The fake Argo CD plays the resources finalizer of an Application being deleted: it removes
// it (the release's resources are gone), guarded by the version it read, and nothing else.
func TestFakeArgoCDReleasesTheResourcesFinalizer(t *testing.T) {
	app := func(finalizers ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
			"name": "a", "resourceVersion": "9", "deletionTimestamp": "2026-01-02T03:04:05Z", "finalizers": finalizers}}}
	}
	got := finalizerPatch(app("other", v1alpha1.ArgoResourcesFinalizer))
	want := []map[string]any{{"op": "replace", "path": "/metadata/resourceVersion", "value": "9"}, {"op": "remove", "path": "/metadata/finalizers/1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	if got := finalizerPatch(app("other")); got != nil {
		t.Errorf("patch %v for an Application without Argo CD's finalizer, want none", got)
	}
}

// auditorCase is a run of etcd events and what the auditor must report of it.
type auditorCase struct {
	events func() []*clientv3.Event
	want   []string // a substring of each violation, in order
}

// runAuditorCases feeds each case's events to a fresh auditor (admin is the admin's username)
// and checks its violations; *rev, the revision the cases' events count from, starts at 0 for
// each.
func runAuditorCases(t *testing.T, admin string, rev *int64, tests map[string]auditorCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			*rev = 0
			a := newAuditor(admin)
			for _, ev := range tc.events() {
				a.observe(ev, time.Now())
			}
			got, _ := a.report()
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
