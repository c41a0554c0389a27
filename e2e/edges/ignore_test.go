//go:build e2e

package edges

import (
	"encoding/json"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// A webhook's certificate Secret whose data its controller fills at run time is left alone:
// jobset's chart renders jobset-webhook-server-cert with empty data; once its controller filled
// it, Argo CD compares the release Synced and a sync of the release keeps the data. The sync
// keeps it by server-side apply (it never takes the keys another manager set) and by the
// comparison exception for the Secret's /data with RespectIgnoreDifferences=true, which keeps
// the excepted data even in a sync that replaces the object (without that option, a Replace
// sync empties the Secret and this test fails).
func TestAWebhookCertificateFilledAtRunTimeIsLeftAlone(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	rt := rolledOut(t, s)
	const rel, ns, secret = "jobset", "jobset-system", "jobset-webhook-server-cert"
	filled := map[string][]byte{"tls.crt": []byte("a certificate filled at run time"), "tls.key": []byte("its key")}
	patch, err := json.Marshal(map[string]any{"data": filled})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.CoreV1().Secrets(ns).Patch(ctx, secret, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "jobset-controller"}); err != nil {
		t.Fatalf("fill secret %s/%s: %v", ns, secret, err)
	}
	keptFilled := func(when string) {
		t.Helper()
		got, err := s.Kube.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got.Data, filled, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("%s: secret %s/%s holds keys %v; want the data filled at run time kept", when, ns, secret, keys(got.Data))
		}
	}

	// A comparison after the fill (a refresh asked by hand; Argo CD answers by removing it).
	stacktest.PatchApp(t, s, rel, `{"metadata":{"annotations":{"`+v1alpha1.AnnotationArgoRefresh+`":"hard"}}}`)
	stacktest.WaitApp(t, s, rel, stepTimeout, "compared again, Synced and Healthy with the filled Secret", func(a *argoapp.Application) bool {
		_, asked := a.Annotations[v1alpha1.AnnotationArgoRefresh]
		return !asked && a.Status.Sync.Status == argoapp.SyncStatusCodeSynced && a.Status.Health.Status == argoapp.HealthStatusHealthy
	})
	keptFilled("after a comparison")

	// A sync of the release (a value its chart renders into a ConfigMap).
	stacktest.SetValue(t, components, rel, "settings", map[string]any{"leftAlone": "yes"})
	ro := change(t, s, rt.Status.ActivePlan)
	stacktest.StepOf(t, ro, rel, v1alpha1.ActionUpgrade)
	if done := waitOutcome(t, s, ro.Name, stacktest.RolloutTimeout); done.Status.Outcome != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s ended %s: %s", ro.Name, done.Status.Outcome, stacktest.DescribeRollout(done))
	}
	app := stacktest.Application(t, s, rel)
	if os := app.Status.OperationState; os == nil || os.Phase != argoapp.OperationSucceeded || os.SyncResult == nil ||
		stacktest.Values(t, &os.SyncResult.Source)["settings"] == nil || app.Status.Sync.Status != argoapp.SyncStatusCodeSynced {
		t.Errorf("want a succeeded sync of the new values and the release Synced: %s", stacktest.DescribeApp(app))
	}
	keptFilled("after a sync")
	rolledOut(t, s)
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
