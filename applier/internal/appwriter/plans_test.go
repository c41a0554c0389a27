package appwriter

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

// TestApplyReadsPlansThroughTheCache: the writer reads a command's plan by digest with a GET,
// once per plan; a plan that cannot be used is the command's final answer (Failed,
// PlanUnreadable), an API error a retry.
func TestApplyReadsPlansThroughTheCache(t *testing.T) {
	p, cm := testPlan(t, "hello")
	other, _ := testPlan(t, "other")
	tests := map[string]struct {
		objects     func() []runtime.Object
		digest      string
		getErr      error
		wantOutcome []string // of each command; nil for an error (the command is redelivered)
		wantMessage string
		wantGets    int // after two commands
	}{
		"a stored plan is read once": {
			objects:     func() []runtime.Object { return []runtime.Object{cm} },
			digest:      p.Digest(),
			wantOutcome: []string{bus.OutcomeWritten, bus.OutcomeRefreshed},
			wantGets:    1,
		},
		"a missing plan is unreadable": {
			objects:     func() []runtime.Object { return nil },
			digest:      p.Digest(),
			wantOutcome: []string{bus.OutcomeFailed, bus.OutcomeFailed},
			wantMessage: "not found",
			wantGets:    2,
		},
		"a plan whose content does not match its digest is unreadable": {
			objects: func() []runtime.Object {
				bad := cm.DeepCopy()
				bad.Data[v1alpha1.PlanDataKey] = strings.Replace(bad.Data[v1alpha1.PlanDataKey], "hello", "tampered", 1)
				return []runtime.Object{bad}
			},
			digest:      p.Digest(),
			wantOutcome: []string{bus.OutcomeFailed, bus.OutcomeFailed},
			wantMessage: "does not match",
			wantGets:    2,
		},
		"a ConfigMap under the name of another digest is unreadable": {
			objects: func() []runtime.Object {
				moved := cm.DeepCopy()
				moved.Name = plan.ConfigMapName(other.Digest())
				return []runtime.Object{moved}
			},
			digest:      other.Digest(),
			wantOutcome: []string{bus.OutcomeFailed, bus.OutcomeFailed},
			wantMessage: "holds plan " + p.Digest(),
			wantGets:    2,
		},
		"an API error is retried": {
			objects:     func() []runtime.Object { return []runtime.Object{cm} },
			digest:      p.Digest(),
			getErr:      apierrors.NewServiceUnavailable("etcd leader changed"),
			wantMessage: "etcd leader changed",
			wantGets:    2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cs := k8sfake.NewClientset(tc.objects()...)
			gets := 0
			cs.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				gets++
				return tc.getErr != nil, nil, tc.getErr
			})
			w, err := New(Config{Apps: newFakeApps(t), Plans: plan.NewCache(plan.GetLoader(cs.CoreV1().ConfigMaps(testOperatorNS)), 0),
				Publisher: &bustest.Recorder{}, Settings: testSettings(), Rollouts: &fakeRollouts{}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range int32(2) {
				cmd := applyCmd(p, "gpu-operator", 1+i, func(c *bus.ApplyCommand) { c.PlanDigest = tc.digest })
				res, err := w.Apply(context.Background(), cmd)
				if tc.wantOutcome == nil {
					if err == nil || !strings.Contains(err.Error(), tc.wantMessage) {
						t.Fatalf("Apply = %+v, %v; want an error saying %q", res, err, tc.wantMessage)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if res.Outcome != tc.wantOutcome[i] || !strings.Contains(res.Message, tc.wantMessage) {
					t.Errorf("command %d: result %s (%s), want %s saying %q", i+1, res.Outcome, res.Message, tc.wantOutcome[i], tc.wantMessage)
				}
				if res.Outcome == bus.OutcomeFailed && res.Reason != bus.ResultReasonPlanUnreadable {
					t.Errorf("reason %s, want %s", res.Reason, bus.ResultReasonPlanUnreadable)
				}
			}
			if gets != tc.wantGets {
				t.Errorf("ConfigMap reads = %d, want %d", gets, tc.wantGets)
			}
		})
	}
}
