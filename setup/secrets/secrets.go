// Package secrets creates the credentials and certificates the chart cannot render under
// helm template (where lookup finds nothing, so a generated value would change on every render):
// the NATS passwords with their bcrypt hashes, and a CA with a serving certificate. Each is
// written once: a Secret that exists is never rewritten, only completed with keys it lacks, so a
// run repeated at every sync (an Argo CD PreSync hook, a Helm pre-upgrade hook) changes nothing.
package secrets

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// HashSuffix ends the key of a password's bcrypt hash: "<user>" holds the password (mounted into
// that binary), "<user>.bcrypt" its hash (read by the NATS server).
const HashSuffix = ".bcrypt"

// PasswordLength is the length of a generated password, from [A-Za-z0-9].
const PasswordLength = 40

// bcryptCost is the hashes' cost: NATS checks a password once per connection.
const bcryptCost = 11

// Result says what a call did.
type Result string

// Results.
const (
	Created   Result = "created"
	Completed Result = "completed" // keys it lacked were added; the existing ones are untouched
	Unchanged Result = "unchanged"
)

// Passwords makes sure Secret name holds a password for every user and, for each of hashed, the
// bcrypt hash of that password under "<user>.bcrypt". It creates the Secret when it does not
// exist, adds the keys it lacks when it does, and never changes a key that is there.
func Passwords(ctx context.Context, client typedcorev1.SecretInterface, name string, labels map[string]string, users, hashed []string) (Result, error) {
	result := Unchanged
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
			if err := complete(s.Data, users, hashed); err != nil {
				return err
			}
			_, err = client.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), name, err) // another run created it: read it again
			}
			if err == nil {
				result = Created
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur.Data == nil {
			cur.Data = map[string][]byte{}
		}
		before := len(cur.Data)
		if err := complete(cur.Data, users, hashed); err != nil {
			return err
		}
		if len(cur.Data) == before {
			return nil
		}
		if _, err = client.Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			result = Completed
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	return result, nil
}

// complete adds to data the passwords and hashes it lacks.
func complete(data map[string][]byte, users, hashed []string) error {
	for _, u := range users {
		if len(data[u]) == 0 {
			pw, err := Password()
			if err != nil {
				return err
			}
			data[u] = []byte(pw)
		}
		if !slices.Contains(hashed, u) || len(data[u+HashSuffix]) > 0 {
			continue
		}
		h, err := bcrypt.GenerateFromPassword(data[u], bcryptCost)
		if err != nil {
			return fmt.Errorf("hash the password of %s: %w", u, err)
		}
		data[u+HashSuffix] = h
	}
	return nil
}

// Password returns a random password of PasswordLength characters from [A-Za-z0-9].
func Password() (string, error) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, PasswordLength)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("generate a password: %w", err)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b), nil
}

// Certificate is what a serving certificate is for.
type Certificate struct {
	// CommonName of the server certificate; the CA is "<CommonName>-ca".
	CommonName string
	// DNSNames the certificate is valid for (wildcards allowed).
	DNSNames []string
	// Validity of the CA and the certificate.
	Validity time.Duration
}

// TLS makes sure Secret name (type kubernetes.io/tls) holds ca.crt, tls.crt and tls.key: a CA
// of its own and a certificate it signed for c. A Secret that exists is left as it is, whoever
// wrote it (a previous run, the chart of an earlier version, a person): rotating means deleting
// it and running again.
func TLS(ctx context.Context, client typedcorev1.SecretInterface, name string, labels map[string]string, c Certificate) (Result, error) {
	if _, err := client.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return Unchanged, nil
	} else if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	data, err := issue(c, time.Now())
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Type: corev1.SecretTypeTLS, Data: data}
	if _, err := client.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return Unchanged, nil // another run was first: its certificate stands
	} else if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	return Created, nil
}

// issue returns a new CA and a server certificate it signed, as the three Secret keys.
func issue(c Certificate, now time.Time) (map[string][]byte, error) {
	if c.CommonName == "" || len(c.DNSNames) == 0 || c.Validity <= 0 {
		return nil, fmt.Errorf("a certificate needs a common name, DNS names and a validity")
	}
	serial := func() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)) }
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: c.CommonName + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(c.Validity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the server key: %w", err)
	}
	if sn, err = serial(); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: c.CommonName}, DNSNames: c.DNSNames,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(c.Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create the server certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"ca.crt":                pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
