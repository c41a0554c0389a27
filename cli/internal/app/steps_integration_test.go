//go:build integration

package app

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// describe shows every step of a rollout whose status lists only the step in flight: the
// definitions and a batch of finished steps are in ConfigMaps, as the planner keeps them.
func TestDescribeReadsStepRecords(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(t, env, opNamespace)
	ctx := context.Background()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	defs := []v1alpha1.Step{
		{Index: 1, Release: "cert-manager", Action: v1alpha1.ActionInstall, State: v1alpha1.StepPending},
		{Index: 2, Release: "gpu-operator", Action: v1alpha1.ActionInstall, DependsOn: []string{"cert-manager"}, State: v1alpha1.StepPending},
		{Index: 3, Release: "dcgm-exporter", Action: v1alpha1.ActionInstall, DependsOn: []string{"gpu-operator"}, State: v1alpha1.StepPending},
	}
	done := defs[0]
	done.State, done.StartedAt, done.FinishedAt = v1alpha1.StepSucceeded, &now, &now
	done.Verdict = &v1alpha1.Verdict{Ready: true, ResourceVersion: "42", Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}}}
	inflight := defs[1]
	inflight.State, inflight.StartedAt = v1alpha1.StepInProgress, &now
	createRollout(t, dyn, &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-records"},
		Spec: v1alpha1.RuntimeRolloutSpec{Runtime: v1alpha1.RuntimeName, RuntimeUID: "u", ToDigest: "sha256:" + strings.Repeat("a", 64)}})
	ro := getRollout(t, dyn, "r-records")
	name := rolloutsteps.DefinitionsName(ro)
	for cmName, steps := range map[string][]v1alpha1.Step{name: defs, rolloutsteps.BatchName(name, 1): {done}} {
		cm, err := rolloutsteps.ConfigMap(ro, opNamespace, cmName, steps)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kc.CoreV1().ConfigMaps(opNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kc.CoreV1().ConfigMaps(opNamespace).Delete(context.Background(), cmName, metav1.DeleteOptions{})
		})
	}
	setRolloutStatus(t, dyn, "r-records", func(st *v1alpha1.RuntimeRolloutStatus) {
		st.Phase = v1alpha1.PhaseProgressing
		st.Steps = []v1alpha1.Step{inflight}
		st.StepRecords = &v1alpha1.StepRecords{Namespace: opNamespace, Definitions: name, FinishedBatches: 1}
		st.StepCounts = rolloutsteps.Count([]v1alpha1.Step{done, inflight, defs[2]})
	})
	checkFormats(t, env, []string{"describe", "r-records"}, map[string]formatCase{
		"text":        {nil, []string{"cert-manager", "Succeeded", "gpu-operator", "InProgress", "dcgm-exporter", "Pending", "[x] Healthy"}},
		"go-template": {[]string{"-o", "go-template={{range .status.steps}}{{.index}}={{.state}};{{end}}"}, []string{"1=Succeeded;2=InProgress;3=Pending;"}},
	})
}
