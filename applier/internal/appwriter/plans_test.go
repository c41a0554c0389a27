package appwriter

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

func TestPlanCache(t *testing.T) {
	p, cm := testPlan(t, "hello")
	other, _ := testPlan(t, "other")
	tests := map[string]struct {
		objects        func() []runtime.Object
		digest         string
		getErr         error
		wantUnreadable bool
		wantErr        string
	}{
		"a stored plan is read": {
			objects: func() []runtime.Object { return []runtime.Object{cm} },
			digest:  p.Digest(),
		},
		"a missing plan is unreadable": {
			objects:        func() []runtime.Object { return nil },
			digest:         p.Digest(),
			wantUnreadable: true,
			wantErr:        "not found",
		},
		"a plan whose content does not match its digest is unreadable": {
			objects: func() []runtime.Object {
				bad := cm.DeepCopy()
				bad.Data[v1alpha1.PlanDataKey] = strings.Replace(bad.Data[v1alpha1.PlanDataKey], "hello", "tampered", 1)
				return []runtime.Object{bad}
			},
			digest:         p.Digest(),
			wantUnreadable: true,
			wantErr:        "does not match",
		},
		"a ConfigMap under the name of another digest is unreadable": {
			objects: func() []runtime.Object {
				moved := cm.DeepCopy()
				moved.Name = plan.ConfigMapName(other.Digest())
				return []runtime.Object{moved}
			},
			digest:         other.Digest(),
			wantUnreadable: true,
			wantErr:        "holds plan " + p.Digest(),
		},
		"an API error is transient": {
			objects: func() []runtime.Object { return []runtime.Object{cm} },
			digest:  p.Digest(),
			getErr:  apierrors.NewServiceUnavailable("etcd leader changed"),
			wantErr: "get plan ConfigMap",
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
			c := NewPlanCache(cs.CoreV1().ConfigMaps(testOperatorNS), testOperatorNS)
			for range 2 {
				got, err := c.Get(context.Background(), tc.digest)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("Get: %v", err)
					}
					if got.Digest() != tc.digest {
						t.Errorf("digest = %s, want %s", got.Digest(), tc.digest)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Get error = %v, want one saying %q", err, tc.wantErr)
				}
				var u *UnreadablePlanError
				if errors.As(err, &u) != tc.wantUnreadable {
					t.Errorf("unreadable = %v, want %v (%v)", !tc.wantUnreadable, tc.wantUnreadable, err)
				}
			}
			wantGets := 2
			if tc.wantErr == "" {
				wantGets = 1 // plans are immutable: read once
			}
			if gets != wantGets {
				t.Errorf("ConfigMap reads = %d, want %d", gets, wantGets)
			}
		})
	}
}

func TestPlanCacheIsBounded(t *testing.T) {
	objs := []runtime.Object{}
	var digests []string
	for i := range planCacheSize + 1 {
		p, cm := testPlan(t, strings.Repeat("x", i+1))
		objs = append(objs, cm)
		digests = append(digests, p.Digest())
	}
	c := NewPlanCache(k8sfake.NewClientset(objs...).CoreV1().ConfigMaps(testOperatorNS), testOperatorNS)
	for _, d := range digests {
		if _, err := c.Get(context.Background(), d); err != nil {
			t.Fatalf("Get %s: %v", d, err)
		}
	}
	if n := len(c.plans); n != planCacheSize {
		t.Errorf("cached plans = %d, want %d", n, planCacheSize)
	}
	if _, ok := c.plans[digests[0]]; ok {
		t.Errorf("the oldest plan is still cached")
	}
}
