//go:build integration

package cabundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{SkipArgoCRDs: true}))
}

// TestInjectorOnARealAPIServer proves the JSON patch is one the API server takes: every webhook
// gets the CA, a second pass writes nothing (the resourceVersion stays), and a new CA (a rotated
// Secret) replaces the old one.
func TestInjectorOnARealAPIServer(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	none := admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:1/validate"
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}}}
	}
	cfgs := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := cfgs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("a.admission.aicr.run"), hook("b.admission.aicr.run")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	i := &Injector{Client: cfgs, Name: "aicr-operator", CAFile: caFile}
	for round, ca := range [][]byte{tlstest.NewServing(t, "aicr-operator-admission").CAPEM, tlstest.NewServing(t, "aicr-operator-admission").CAPEM} {
		if err := os.WriteFile(caFile, ca, 0o600); err != nil {
			t.Fatal(err)
		}
		if wrote, err := i.Once(ctx); err != nil || !wrote {
			t.Fatalf("round %d: Once = %v, %v; want a write", round, wrote, err)
		}
		got, err := cfgs.Get(ctx, "aicr-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range got.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				t.Errorf("round %d: webhook %s has another caBundle", round, w.Name)
			}
		}
		if wrote, err := i.Once(ctx); err != nil || wrote {
			t.Errorf("round %d: a second Once = %v, %v; want nothing written", round, wrote, err)
		}
		if again, _ := cfgs.Get(ctx, "aicr-operator", metav1.GetOptions{}); again.ResourceVersion != got.ResourceVersion {
			t.Errorf("round %d: the second pass wrote (resourceVersion %s, then %s)", round, got.ResourceVersion, again.ResourceVersion)
		}
	}
}
