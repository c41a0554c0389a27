package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/aicr-run/aicr-operator/admission/internal/certs"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// handshakeTimeout bounds one TLS handshake with the local server.
const handshakeTimeout = 10 * time.Second

// serveTLS runs the webhook server as the binary does (certs.ServerConfig) and returns its
// address and the test CA's pool.
func serveTLS(t *testing.T) (string, *tlstest.Serving) {
	t.Helper()
	pair := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := pair.Write(t, t.TempDir())
	h, _, _ := newHandler(t)
	srv, err := Listen("127.0.0.1:0", certs.ServerConfig(certs.NewReloader(certFile, keyFile)), h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return srv.Addr(), &pair
}

// TestTLSHandshakeNeedsVersion12 proves, one protocol version at a time, that a client limited
// to TLS 1.0 or 1.1 fails the handshake with the webhook (the server refuses the version), and
// that TLS 1.2 and 1.3 clients complete it at the version they asked for.
func TestTLSHandshakeNeedsVersion12(t *testing.T) {
	addr, pair := serveTLS(t)
	cases := map[string]struct {
		version uint16
		wantOK  bool
	}{
		"a TLS 1.0 client is refused": {version: tls.VersionTLS10},
		"a TLS 1.1 client is refused": {version: tls.VersionTLS11},
		"a TLS 1.2 client is served":  {version: tls.VersionTLS12, wantOK: true},
		"a TLS 1.3 client is served":  {version: tls.VersionTLS13, wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: handshakeTimeout}, Config: &tls.Config{
				RootCAs: pair.Pool(), MinVersion: tc.version, MaxVersion: tc.version,
			}}
			ctx, cancel := context.WithTimeout(t.Context(), handshakeTimeout)
			defer cancel()
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if !tc.wantOK {
				if err == nil {
					state := conn.(*tls.Conn).ConnectionState()
					_ = conn.Close()
					t.Fatalf("handshake at %s succeeded (negotiated %s); want it refused", tls.VersionName(tc.version), tls.VersionName(state.Version))
				}
				if !strings.Contains(err.Error(), "protocol version") {
					t.Errorf("handshake error %q; want the server's protocol version alert", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake at %s: %v", tls.VersionName(tc.version), err)
			}
			defer conn.Close()
			if got := conn.(*tls.Conn).ConnectionState().Version; got != tc.version {
				t.Errorf("negotiated %s; want %s", tls.VersionName(got), tls.VersionName(tc.version))
			}
		})
	}
}

// TestPlainHTTPGetsNoAdmissionResponse proves a well-formed AdmissionReview sent over plain
// HTTP is never reviewed: the answer is Go's 400 for HTTP on an HTTPS port, and its body is not
// an AdmissionReview.
func TestPlainHTTPGetsNoAdmissionResponse(t *testing.T) {
	addr, _ := serveTLS(t)
	client := &http.Client{Timeout: handshakeTimeout}
	resp, err := client.Post("http://"+addr+Path, "application/json", bytes.NewReader(reviewBody(t, applier, armedApplication(1))))
	if err != nil {
		// Refusing the connection outright is as good: no review was answered.
		return
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP answered %d %q; want 400 Client sent an HTTP request to an HTTPS server", resp.StatusCode, body)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err == nil && review.Response != nil {
		t.Errorf("plain HTTP got an admission response: %+v", review.Response)
	}
}
