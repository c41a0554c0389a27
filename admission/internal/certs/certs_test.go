package certs

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

func serialOf(t *testing.T, r *Reloader) string {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// touch moves a file's modification time forward, as a rewrite a second later would.
func touch(t *testing.T, path string, d time.Duration) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime().Add(d), fi.ModTime().Add(d)); err != nil {
		t.Fatal(err)
	}
}

// TestReloaderPicksUpARenewedCertificate proves a certificate rewritten on disk is served from
// the next handshake on, without a restart.
func TestReloaderPicksUpARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	first := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := first.Write(t, dir)
	r := NewReloader(certFile, keyFile)
	if err := r.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got, want := serialOf(t, r), first.Serial.String(); got != want {
		t.Fatalf("serial = %s; want %s", got, want)
	}
	second := tlstest.NewServing(t, "aicr-operator-admission")
	second.Write(t, dir)
	touch(t, certFile, time.Second)
	touch(t, keyFile, time.Second)
	if got, want := serialOf(t, r), second.Serial.String(); got != want {
		t.Errorf("serial after renewal = %s; want %s", got, want)
	}
}

// TestReloaderKeepsTheLastGoodCertificate proves a half-written pair (new certificate, old key)
// leaves the old certificate in service until the pair matches again.
func TestReloaderKeepsTheLastGoodCertificate(t *testing.T) {
	dir := t.TempDir()
	first := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, _ := first.Write(t, dir)
	r := NewReloader(certFile, filepath.Join(dir, "tls.key"))
	second := tlstest.NewServing(t, "aicr-operator-admission")
	if err := os.WriteFile(certFile, second.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	touch(t, certFile, time.Second)
	if got, want := serialOf(t, r), first.Serial.String(); got != want {
		t.Errorf("serial with a mismatched pair = %s; want the last good %s", got, want)
	}
	if err := r.Check(t.Context()); err != nil {
		t.Errorf("Check with the last good certificate loaded: %v", err)
	}
	second.Write(t, dir)
	touch(t, certFile, 2*time.Second)
	if got, want := serialOf(t, r), second.Serial.String(); got != want {
		t.Errorf("serial once the pair matches = %s; want %s", got, want)
	}
}

// TestReloaderNotReadyWithoutFiles proves readiness fails until the files exist, then passes.
func TestReloaderNotReadyWithoutFiles(t *testing.T) {
	dir := t.TempDir()
	r := NewReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err := r.Check(t.Context()); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("Check without files = %v; want ErrNotLoaded", err)
	}
	if _, err := r.GetCertificate(nil); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("GetCertificate without files = %v; want ErrNotLoaded", err)
	}
	tlstest.NewServing(t, "aicr-operator-admission").Write(t, dir)
	if err := r.Check(t.Context()); err != nil {
		t.Errorf("Check once the files exist: %v", err)
	}
}

// TestReloaderReportsExpiry proves an expired certificate makes the webhook unready.
func TestReloaderReportsExpiry(t *testing.T) {
	certFile, keyFile := tlstest.NewServing(t, "aicr-operator-admission").Write(t, t.TempDir())
	r := NewReloader(certFile, keyFile)
	r.now = func() time.Time { return time.Now().Add(tlstest.Validity + 24*time.Hour) }
	if err := r.Check(t.Context()); err == nil {
		t.Error("Check with an expired certificate = nil; want an error")
	}
}
