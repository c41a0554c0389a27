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
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
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

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// Server issues a serving certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(name string) (Pair, error) {
	return ca.issue(name, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with common name name.
func (ca *CA) Client(name string) (Pair, error) {
	return ca.issue(name, nil, nil, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(name string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key of %s: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		DNSNames: dns, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("create certificate of %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key of %s: %w", name, err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
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

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("read random serial: %v", err)) // crypto/rand does not fail on Linux
	}
	return n
}
