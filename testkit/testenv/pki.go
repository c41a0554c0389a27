package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the generated certificates are valid. Environments live for minutes;
// a kept one (AICR_KEEP_TESTENV) stays usable for a long debugging session.
const certValidity = 7 * 24 * time.Hour

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
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "aicr-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := signCert(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("sign ca certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse ca certificate: %w", err)
	}

	p := &pki{CACert: pemCert(caDER)}
	if p.CAKey, err = pemKey(caKey); err != nil {
		return nil, err
	}

	leaf := func(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
		}
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certValidity)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.BasicConstraintsValid = true
		der, err := signCert(tmpl, caCert, key.Public(), caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("sign certificate %s: %w", tmpl.Subject.CommonName, err)
		}
		keyPEM, err = pemKey(key)
		return pemCert(der), keyPEM, err
	}
	p.ServingCert, p.ServingKey, err = leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    servingDNSNames,
		IPAddresses: servingIPs,
	})
	if err != nil {
		return nil, err
	}
	p.AdminCert, p.AdminKey, err = leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if p.SAKey, err = pemKey(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("marshal service-account public key: %w", err)
	}
	p.SAPub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return p, nil
}

func signCert(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
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
