package secrets

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"regexp"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

func TestPasswordsCreateCompleteNeverRewrite(t *testing.T) {
	ctx := context.Background()
	kc := k8sfake.NewClientset()
	client := kc.CoreV1().Secrets("aicr-system")
	labels := map[string]string{"app.kubernetes.io/part-of": "aicr-operator"}

	res, err := Passwords(ctx, client, "nats-auth", labels, []string{"planner", "route"}, []string{"planner"})
	if err != nil || res != Created {
		t.Fatalf("first run: %v %v, want created", res, err)
	}
	first, _ := client.Get(ctx, "nats-auth", metav1.GetOptions{})
	if first.Labels["app.kubernetes.io/part-of"] != "aicr-operator" || first.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret labels %v type %s", first.Labels, first.Type)
	}
	pw := first.Data["planner"]
	if !regexp.MustCompile(`^[A-Za-z0-9]{40}$`).Match(pw) || !regexp.MustCompile(`^[A-Za-z0-9]{40}$`).Match(first.Data["route"]) {
		t.Errorf("passwords %q %q, want 40 alphanumerics", pw, first.Data["route"])
	}
	if err := bcrypt.CompareHashAndPassword(first.Data["planner"+HashSuffix], pw); err != nil {
		t.Errorf("the hash is not the password's: %v", err)
	}
	if _, ok := first.Data["route"+HashSuffix]; ok {
		t.Error("route got a hash, which nobody reads")
	}

	res, err = Passwords(ctx, client, "nats-auth", labels, []string{"planner", "route"}, []string{"planner"})
	if err != nil || res != Unchanged {
		t.Fatalf("second run: %v %v, want unchanged", res, err)
	}
	again, _ := client.Get(ctx, "nats-auth", metav1.GetOptions{})
	if string(again.Data["planner"]) != string(pw) || string(again.Data["planner"+HashSuffix]) != string(first.Data["planner"+HashSuffix]) {
		t.Error("a second run changed a password or its hash")
	}

	// A new user (a binary added by an upgrade) is added; the others stay as they are.
	res, err = Passwords(ctx, client, "nats-auth", labels, []string{"planner", "applier", "route"}, []string{"planner", "applier"})
	if err != nil || res != Completed {
		t.Fatalf("a run with a new user: %v %v, want completed", res, err)
	}
	done, _ := client.Get(ctx, "nats-auth", metav1.GetOptions{})
	if string(done.Data["planner"]) != string(pw) || len(done.Data["applier"]) != PasswordLength || len(done.Data["applier"+HashSuffix]) == 0 {
		t.Errorf("completed secret: planner kept %v, applier %q", string(done.Data["planner"]) == string(pw), done.Data["applier"])
	}

	// A user-written password without a hash gets the hash of that password.
	done.Data["readiness"] = []byte("chosen-by-a-person")
	if _, err := client.Update(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Passwords(ctx, client, "nats-auth", labels, []string{"readiness"}, []string{"readiness"}); err != nil {
		t.Fatal(err)
	}
	got, _ := client.Get(ctx, "nats-auth", metav1.GetOptions{})
	if string(got.Data["readiness"]) != "chosen-by-a-person" || bcrypt.CompareHashAndPassword(got.Data["readiness"+HashSuffix], []byte("chosen-by-a-person")) != nil {
		t.Error("a person's password was replaced, or hashed wrongly")
	}
}

func TestTLSCreatesOnceAndLeavesAnExistingSecret(t *testing.T) {
	ctx := context.Background()
	kc := k8sfake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "aicr-system"}, Data: map[string][]byte{"tls.crt": []byte("x")}})
	client := kc.CoreV1().Secrets("aicr-system")
	c := Certificate{CommonName: "aicr-operator-admission.aicr-system.svc",
		DNSNames: []string{"aicr-operator-admission.aicr-system.svc", "aicr-operator-admission.aicr-system.svc.cluster.local"}, Validity: 48 * time.Hour}
	if res, err := TLS(ctx, client, "webhook-tls", nil, c); err != nil || res != Created {
		t.Fatalf("first run: %v %v", res, err)
	}
	s, _ := client.Get(ctx, "webhook-tls", metav1.GetOptions{})
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("type %s", s.Type)
	}
	parse := func(key string) *x509.Certificate {
		b, _ := pem.Decode(s.Data[key])
		if b == nil {
			t.Fatalf("%s is not PEM", key)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	ca, leaf := parse("ca.crt"), parse("tls.crt")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range c.DNSNames {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("the certificate does not verify for %s against its CA: %v", name, err)
		}
	}
	if !ca.IsCA || leaf.NotAfter.Sub(leaf.NotBefore) < 48*time.Hour {
		t.Errorf("CA %v, validity %s", ca.IsCA, leaf.NotAfter.Sub(leaf.NotBefore))
	}
	if res, err := TLS(ctx, client, "webhook-tls", nil, c); err != nil || res != Unchanged {
		t.Fatalf("second run: %v %v", res, err)
	}
	again, _ := client.Get(ctx, "webhook-tls", metav1.GetOptions{})
	if string(again.Data["tls.key"]) != string(s.Data["tls.key"]) {
		t.Error("a second run replaced the key")
	}
	if res, err := TLS(ctx, client, "mine", nil, c); err != nil || res != Unchanged {
		t.Fatalf("an existing Secret: %v %v", res, err)
	}
	if mine, _ := client.Get(ctx, "mine", metav1.GetOptions{}); string(mine.Data["tls.crt"]) != "x" {
		t.Error("a Secret written by someone else was rewritten")
	}
	if _, err := TLS(ctx, client, "bad", nil, Certificate{CommonName: "x"}); err == nil {
		t.Error("a certificate without DNS names was issued")
	}
}
