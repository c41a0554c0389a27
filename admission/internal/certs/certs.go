// Package certs serves the webhook's TLS certificate from files and picks up a new one when the
// files change on disk (cert-manager renewing the Secret, the kubelet swapping the volume's
// symlink), without a restart.
package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrNotLoaded is returned while no certificate could be loaded yet.
var ErrNotLoaded = errors.New("no serving certificate loaded")

// stamp identifies one version of a file: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

// Reloader serves the certificate and key in CertFile and KeyFile. Each TLS handshake stats the
// two files (cheap) and reloads them when either changed; a pair that fails to load (half
// written, mismatched) leaves the last good certificate in service. Safe for concurrent use.
type Reloader struct {
	certFile, keyFile string
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	leaf    *x509.Certificate
	stamps  [2]stamp
	lastErr error
}

// NewReloader returns a Reloader for the two PEM files and tries a first load; a failure is
// reported by Check and GetCertificate until the files become valid.
func NewReloader(certFile, keyFile string) *Reloader {
	r := &Reloader{certFile: certFile, keyFile: keyFile, now: time.Now}
	r.mu.Lock()
	r.refreshLocked()
	r.mu.Unlock()
	return r
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshLocked()
	if r.cert == nil {
		return nil, fmt.Errorf("%w: %v", ErrNotLoaded, r.lastErr)
	}
	return r.cert, nil
}

// Check is a readiness check: nil when a certificate is loaded and not expired.
func (r *Reloader) Check(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshLocked()
	switch {
	case r.cert == nil:
		return fmt.Errorf("%w: %v", ErrNotLoaded, r.lastErr)
	case r.now().After(r.leaf.NotAfter):
		return fmt.Errorf("serving certificate expired at %s", r.leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// NotAfter returns the loaded certificate's expiry (zero when none is loaded).
func (r *Reloader) NotAfter() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaf == nil {
		return time.Time{}
	}
	return r.leaf.NotAfter
}

// refreshLocked reloads the pair when either file's stamp changed since the last good load.
func (r *Reloader) refreshLocked() {
	var now [2]stamp
	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			r.lastErr = fmt.Errorf("stat %s: %w", f, err)
			return
		}
		now[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	if r.cert != nil && now == r.stamps {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.lastErr = fmt.Errorf("load key pair %s, %s: %w", r.certFile, r.keyFile, err)
		return
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			r.lastErr = fmt.Errorf("parse certificate %s: %w", r.certFile, err)
			return
		}
	}
	r.cert, r.leaf, r.stamps, r.lastErr = &cert, leaf, now, nil
}

// ServerConfig returns the webhook's TLS configuration: TLS 1.2 or newer, the certificate from
// r.
func ServerConfig(r *Reloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
	}
}
