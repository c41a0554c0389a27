// Package tlstest makes throwaway TLS material for tests and the local stack: a CA and the
// server and client certificates it signs, as PEM, and the files to load them from.
package tlstest

import (
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
	"testing"
	"time"
)

// Validity is how long the certificates are valid: long enough for a kept local stack.
const Validity = 7 * 24 * time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	// CertPEM is the CA certificate: what clients and servers trust.
	CertPEM []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// KeyPEM is the CA's private key in PKCS#8, for a server that signs with it (kube-controller-
// manager signs the cluster's certificate requests with the cluster CA).
func (ca *CA) KeyPEM() ([]byte, error) { return KeyPEM(ca.key) }

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// Server issues a serving certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(name string) (Pair, error) {
	return ca.Issue(Leaf{CommonName: name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: x509.ExtKeyUsageServerAuth})
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(name string) (Pair, error) {
	return ca.Issue(Leaf{CommonName: name, Usage: x509.ExtKeyUsageClientAuth})
}

// Leaf says what a certificate the CA issues is for.
type Leaf struct {
	// CommonName and Organization are the subject (a Kubernetes client certificate's user and
	// groups).
	CommonName   string
	Organization []string
	// DNSNames and IPs are the names a serving certificate covers.
	DNSNames []string
	IPs      []net.IP
	// Usage is server or client authentication.
	Usage x509.ExtKeyUsage
}

// Issue makes a key and a certificate for l, signed by the CA.
func (ca *CA) Issue(l Leaf) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key of %s: %w", l.CommonName, err)
	}
	sn, err := serial()
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: l.CommonName, Organization: l.Organization},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		DNSNames: l.DNSNames, IPAddresses: l.IPs, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{l.Usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("create certificate of %s: %w", l.CommonName, err)
	}
	keyPEM, err := KeyPEM(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key of %s: %w", l.CommonName, err)
	}
	return Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// KeyPEM encodes key as a PKCS#8 "PRIVATE KEY" block, which etcd, kube-apiserver, nats-server
// and Go's crypto/tls all read.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Files are the paths Write wrote.
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// Write makes a CA named name, a serving certificate for 127.0.0.1 and a client certificate,
// and writes them into dir as ca.crt, server.crt, server.key, client.crt and client.key (0600).
func Write(dir, name string) (Files, error) {
	ca, err := NewCA(name + " CA")
	if err != nil {
		return Files{}, err
	}
	srv, err := ca.Server(name)
	if err != nil {
		return Files{}, err
	}
	cli, err := ca.Client(name + " client")
	if err != nil {
		return Files{}, err
	}
	f := Files{
		CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	for path, data := range map[string][]byte{
		f.CA: ca.CertPEM, f.ServerCert: srv.CertPEM, f.ServerKey: srv.KeyPEM, f.ClientCert: cli.CertPEM, f.ClientKey: cli.KeyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Files{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

// Serving is a fresh CA and a serving certificate it signed for 127.0.0.1 and localhost, in the
// shape a webhook's tests use: the CA as a caBundle or a pool, the certificate as files.
type Serving struct {
	// CAPEM is the CA certificate (a webhook configuration's caBundle).
	CAPEM []byte
	// CertPEM and KeyPEM are the serving certificate and its key.
	CertPEM, KeyPEM []byte
	// Serial is the serving certificate's serial number.
	Serial *big.Int
}

// NewServing makes a Serving whose certificate has the common name name.
func NewServing(t testing.TB, name string) Serving {
	t.Helper()
	ca, err := NewCA(name + " CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Server(name)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(srv.CertPEM)
	if block == nil {
		t.Fatal("no PEM certificate issued")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return Serving{CAPEM: ca.CertPEM, CertPEM: srv.CertPEM, KeyPEM: srv.KeyPEM, Serial: cert.SerialNumber}
}

// Write writes the serving certificate and key as tls.crt and tls.key in dir and returns
// their paths.
func (s Serving) Write(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, s.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, s.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Pool is a certificate pool holding the CA.
func (s Serving) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	return pool
}
