//go:build chaos

package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// The audit flags what the chaos test is there to catch, and nothing else.
func TestAuditorFlagsRewritesRegressionsAndDeletes(t *testing.T) {
	put := func(name, step string, v int) *clientv3.Event {
		obj := map[string]any{
			"metadata": map[string]any{"name": name, "annotations": map[string]any{v1alpha1.AnnotationStep: step}},
			"spec":     map[string]any{"source": map[string]any{"helm": map[string]any{"valuesObject": map[string]any{"v": v}}}},
		}
		raw, _ := json.Marshal(obj)
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(applicationsKey + name), Value: raw}}
	}
	del := &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(applicationsKey + "a")}}
	tests := map[string]struct {
		events []*clientv3.Event
		want   []string // a substring of each violation, in order
	}{
		"steps moving forward, each rewritten with its own spec (redelivery, status writes)": {
			events: []*clientv3.Event{put("a", "r1/1", 1), put("a", "r1/1", 1), put("a", "r2/1", 2), put("b", "r2/2", 1), put("a", "r2/1", 2)},
		},
		"a step written again with other values": {
			events: []*clientv3.Event{put("a", "r1/1", 1), put("a", "r1/1", 2)},
			want:   []string{"written twice under step r1/1 with different specs"},
		},
		"a stale command of an earlier rollout writing again": {
			events: []*clientv3.Event{put("a", "r1/1", 1), put("a", "r2/1", 2), put("a", "r1/1", 1)},
			want:   []string{"went back to step r1/1 after r2/1"},
		},
		"an Application deleted": {
			events: []*clientv3.Event{put("a", "r1/1", 1), del},
			want:   []string{"Application a was deleted"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &auditor{specs: map[string]map[string]string{}, steps: map[string][]string{}}
			for _, ev := range tc.events {
				a.observe(ev)
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
