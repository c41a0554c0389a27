//go:build integration

package app

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{SkipArgoCRDs: true}))
}

// TestSetupIsIdempotentOnARealAPIServer runs the binary's Main twice against a real
// kube-apiserver: the first run creates the three Secrets, the second writes nothing (every
// resourceVersion stays), and a Secret a person created beforehand is left alone.
func TestSetupIsIdempotentOnARealAPIServer(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "aicr-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-webhook-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("person's"), "tls.key": []byte("person's")}}
	if _, err := kc.CoreV1().Secrets("aicr-system").Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + env.Kubeconfig, "--namespace=aicr-system", "--instance=aicr-operator",
		"--nats-auth-secret=aicr-operator-nats-auth",
		"--nats-tls-secret=aicr-operator-nats-tls", "--nats-tls-dns-names=aicr-operator-nats.aicr-system.svc,*.aicr-operator-nats-headless.aicr-system.svc.cluster.local",
		"--webhook-tls-secret=my-webhook-tls", "--webhook-tls-dns-names=aicr-operator-admission.aicr-system.svc"}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, n := range []string{"aicr-operator-nats-auth", "aicr-operator-nats-tls", "my-webhook-tls"} {
			s, err := kc.CoreV1().Secrets("aicr-system").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("secret %s: %v", n, err)
			}
			out[n] = s.ResourceVersion
			if n == "aicr-operator-nats-auth" && (len(s.Data["planner"]) != 40 || len(s.Data["admission.bcrypt"]) == 0 || len(s.Data["route"]) != 40 || s.Labels[LabelManagedBy] != ManagedBy) {
				t.Errorf("nats-auth keys %v labels %v", keys(s.Data), s.Labels)
			}
			if n == "my-webhook-tls" && string(s.Data["tls.crt"]) != "person's" {
				t.Error("the person's webhook Secret was rewritten")
			}
		}
		return out
	}
	var out strings.Builder
	if code := Main(ctx, args, &out); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, out.String())
	}
	first := versions()
	out.Reset()
	if code := Main(ctx, args, &out); code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, out.String())
	}
	if second := versions(); second["aicr-operator-nats-auth"] != first["aicr-operator-nats-auth"] || second["aicr-operator-nats-tls"] != first["aicr-operator-nats-tls"] || second["my-webhook-tls"] != first["my-webhook-tls"] {
		t.Errorf("the second run wrote: resourceVersions %v, then %v", first, second)
	}
	if !strings.Contains(out.String(), `"outcome":"unchanged"`) || strings.Contains(out.String(), `"outcome":"created"`) {
		t.Errorf("the second run's log does not say unchanged:\n%s", out.String())
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
