package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// The names the serving certificate covers: loopback, and the in-cluster names of the kubernetes
// Service (10.0.0.1 is the first address of --service-cluster-ip-range).
var (
	servingDNSNames = []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}
	servingIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
)

// pki is every key and certificate an environment needs, PEM-encoded. Keys are ECDSA P-256 in
// PKCS#8, which etcd, kube-apiserver, kube-controller-manager and client-go all read.
type pki struct {
	CACert, CAKey           []byte
	ServingCert, ServingKey []byte
	AdminCert, AdminKey     []byte
	// SAKey signs service-account tokens; SAPub verifies them.
	SAKey, SAPub []byte
}

// pkiFiles are the paths writeFiles wrote.
type pkiFiles struct {
	CACert, CAKey, ServingCert, ServingKey, AdminCert, AdminKey, SAKey, SAPub string
}

func newPKI() (*pki, error) {
	ca, err := tlstest.NewCA("aicr-testenv-ca")
	if err != nil {
		return nil, err
	}
	p := &pki{CACert: ca.CertPEM}
	if p.CAKey, err = ca.KeyPEM(); err != nil {
		return nil, err
	}
	serving, err := ca.Issue(tlstest.Leaf{
		CommonName: "kube-apiserver", DNSNames: servingDNSNames, IPs: servingIPs,
		Usage: x509.ExtKeyUsageServerAuth,
	})
	if err != nil {
		return nil, err
	}
	p.ServingCert, p.ServingKey = serving.CertPEM, serving.KeyPEM
	admin, err := ca.Issue(tlstest.Leaf{
		CommonName: "admin", Organization: []string{"system:masters"}, Usage: x509.ExtKeyUsageClientAuth,
	})
	if err != nil {
		return nil, err
	}
	p.AdminCert, p.AdminKey = admin.CertPEM, admin.KeyPEM

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if p.SAKey, err = tlstest.KeyPEM(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("marshal service-account public key: %w", err)
	}
	p.SAPub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return p, nil
}

// writeFiles writes every file into dir (created if missing) with owner-only permissions.
func (p *pki) writeFiles(dir string) (pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return pkiFiles{}, fmt.Errorf("create pki dir: %w", err)
	}
	f := pkiFiles{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
	}
	for path, data := range map[string][]byte{
		f.CACert: p.CACert, f.CAKey: p.CAKey, f.ServingCert: p.ServingCert, f.ServingKey: p.ServingKey,
		f.AdminCert: p.AdminCert, f.AdminKey: p.AdminKey, f.SAKey: p.SAKey, f.SAPub: p.SAPub,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return pkiFiles{}, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return f, nil
}
