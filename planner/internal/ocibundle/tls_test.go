package ocibundle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// TestPullOverTLSWithAPrivateCA pulls from a registry whose certificate a private CA issued and
// which asks for a client certificate of that CA: the pull works with the CA (--registry-ca-file)
// and the repo-creds Secret's tlsClientCertData/tlsClientCertKey, or with insecure; it fails
// without the CA, without the client certificate, and with a broken one (whose message names the
// keys, never their content).
func TestPullOverTLSWithAPrivateCA(t *testing.T) {
	ca, err := tlstest.NewCA("registry-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Server("registry")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("planner")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	reg := &registry{blobs: map[string][]byte{}}
	reg.srv = httptest.NewUnstartedServer(reg)
	reg.srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	reg.srv.StartTLS()
	t.Cleanup(reg.srv.Close)
	src := reg.add("aicr/bundles/gpu", doc)

	secret := func(extra map[string]string) *secrets {
		data := map[string][]byte{KeyURL: []byte("oci://" + reg.host() + "/aicr"), KeyUsername: []byte("AWS"), KeyPassword: []byte(goodToken)}
		for k, v := range extra {
			data[k] = []byte(v)
		}
		sec := &corev1.Secret{Data: data}
		sec.Namespace, sec.Name = "argocd", "aicr-registry"
		return &secrets{sec: sec}
	}
	withCert := map[string]string{KeyTLSClientCertData: string(client.CertPEM), KeyTLSClientCertKey: string(client.KeyPEM)}

	t.Run("the private CA and the Secret's client certificate", func(t *testing.T) {
		got, err := newPuller(secret(withCert), Config{RootCAs: pool}).Pull(context.Background(), src)
		if err != nil || string(got) != doc {
			t.Fatalf("pull = %q, %v", got, err)
		}
	})
	t.Run("insecure, as Argo CD reads it", func(t *testing.T) {
		insecure := map[string]string{KeyInsecure: "true"}
		for k, v := range withCert {
			insecure[k] = v
		}
		if _, err := newPuller(secret(insecure), Config{}).Pull(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the system's roots only", func(t *testing.T) {
		_, err := newPuller(secret(withCert), Config{}).Pull(context.Background(), src)
		wantPlanError(t, err, v1alpha1.ReasonBundleUnavailable, fieldRepository, "certificate signed by unknown authority")
	})
	t.Run("no client certificate", func(t *testing.T) {
		_, err := newPuller(secret(nil), Config{RootCAs: pool}).Pull(context.Background(), src)
		wantPlanError(t, err, v1alpha1.ReasonBundleUnavailable, fieldRepository, "certificate")
	})
	t.Run("a key that is not the certificate's", func(t *testing.T) {
		other, err := ca.Client("other")
		if err != nil {
			t.Fatal(err)
		}
		broken := map[string]string{KeyTLSClientCertData: string(client.CertPEM), KeyTLSClientCertKey: string(other.KeyPEM)}
		_, err = newPuller(secret(broken), Config{RootCAs: pool}).Pull(context.Background(), src)
		wantPlanError(t, err, v1alpha1.ReasonUnauthorized, fieldRepository, "tlsClientCertData and tlsClientCertKey must be a PEM certificate and its PEM private key")
		if pe := err.Error(); strings.Contains(pe, string(other.KeyPEM[28:60])) {
			t.Fatalf("the message holds key material: %s", pe)
		}
	})
}
