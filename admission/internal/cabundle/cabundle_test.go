package cabundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

func TestInjectorWritesOnlyWhatDiffers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	ca := tlstest.NewServing(t, "aicr-operator-admission").CAPEM
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	kc := k8sfake.NewClientset(&admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "a.admission.aicr.run"}, {Name: "b.admission.aicr.run", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("old")}}},
	})
	patches := 0
	kc.PrependReactor("patch", "validatingwebhookconfigurations", func(clienttesting.Action) (bool, runtime.Object, error) {
		patches++
		return false, nil, nil
	})
	i := &Injector{Client: kc.AdmissionregistrationV1().ValidatingWebhookConfigurations(), Name: "aicr-operator", CAFile: caFile}
	if err := i.Check(ctx); err == nil {
		t.Error("ready before any injection")
	}
	wrote, err := i.Once(ctx)
	if err != nil || !wrote {
		t.Fatalf("first Once = %v, %v; want a write", wrote, err)
	}
	got, _ := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "aicr-operator", metav1.GetOptions{})
	for _, w := range got.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			t.Errorf("webhook %s caBundle %q, want the CA", w.Name, w.ClientConfig.CABundle)
		}
	}
	if wrote, err := i.Once(ctx); err != nil || wrote || patches != 1 {
		t.Errorf("second Once = %v, %v with %d patches; want nothing written", wrote, err, patches)
	}
	if err := os.WriteFile(caFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := i.Once(ctx); err == nil || !strings.Contains(err.Error(), "something other than PEM certificates") {
		t.Errorf("a broken CA file: %v", err)
	}
}
