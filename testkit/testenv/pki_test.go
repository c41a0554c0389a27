package testenv

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE block in %q", data)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	return c
}

func TestPKIServingCertVerifiesForEveryName(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CACert) {
		t.Fatal("CA certificate does not parse")
	}
	serving := parseCert(t, p.ServingCert)
	for _, name := range []string{"127.0.0.1", "10.0.0.1", "localhost", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		_, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := serving.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Error("serving certificate verified for example.com, want a name mismatch")
	}
}

func TestPKIAdminCertIsSystemMastersClient(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CACert)
	admin := parseCert(t, p.AdminCert)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("admin certificate as client: %v", err)
	}
	if diff := cmp.Diff([]string{"system:masters"}, admin.Subject.Organization); diff != "" {
		t.Errorf("admin organization (-want +got):\n%s", diff)
	}
	if admin.Subject.CommonName != "admin" {
		t.Errorf("admin common name = %q, want admin", admin.Subject.CommonName)
	}
}

func TestPKIServiceAccountKeyPairMatches(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	keyBlock, _ := pem.Decode(p.SAKey)
	pubBlock, _ := pem.Decode(p.SAPub)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" || pubBlock == nil || pubBlock.Type != "PUBLIC KEY" {
		t.Fatalf("want PRIVATE KEY and PUBLIC KEY blocks, got %v / %v", keyBlock, pubBlock)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(pubBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		t.Error("service-account public key does not belong to the private key")
	}
}

// The serving certificate and the admin client certificate work together over mutual TLS, the
// way the apiserver and client-go use them.
func TestPKIMutualTLSHandshake(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACert)
	serverCert, err := tls.X509KeyPair(p.ServingCert, p.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.Organization[0])
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	clientCert, err := tls.X509KeyPair(p.AdminCert, p.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}}}
	resp, err := c.Get(srv.URL) // https://127.0.0.1:port: verified against the IP SAN
	if err != nil {
		t.Fatalf("mutual TLS request: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "system:masters" {
		t.Errorf("server saw client organization %q, want system:masters", body)
	}
}

func TestPKIWriteFilesOwnerOnly(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	f, err := p.writeFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{f.CACert: p.CACert, f.AdminKey: p.AdminKey, f.SAPub: p.SAPub, f.ServingKey: p.ServingKey} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: content differs", filepath.Base(path))
		}
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(path), st.Mode().Perm())
		}
	}
}
