// Package servicetest holds the helpers the start-up tests of the binaries share: a free
// loopback address for their health and metrics servers, a fake API server with a kubeconfig
// for it, and polling until the binary answers.
package servicetest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/testkit/freeport"
)

// FreeAddr returns a loopback address with a port that was free a moment ago, drawn where the
// kernel does not hand ports out by itself: an httptest server or an outgoing connection
// started after this call cannot take it (package freeport).
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// FakeAPIServer serves h as the API server until the test ends and returns the path of a
// kubeconfig (token user) that points at it.
func FakeAPIServer(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: test}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, srv.URL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// EventuallyEvery is how often Eventually evaluates its condition.
const EventuallyEvery = 20 * time.Millisecond

// Eventually calls cond every EventuallyEvery until it reports true, and fails the test once
// timeout has passed, naming what it waited for and what cond saw last (its second result). It
// is the one polling helper of the tests that have a testing.TB; testenv.WaitFor is the one of
// code that returns an error instead.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(EventuallyEvery)
	defer tick.Stop()
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if saw == "" {
				t.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			t.Fatalf("timed out after %s waiting for %s; saw %s", timeout, what, saw)
		}
		<-tick.C
	}
}

// Poll is Eventually of a condition that says what it saw as an error: it is met once f
// returns nil.
func Poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	Eventually(t, timeout, what, func() (bool, string) {
		err := f()
		if err == nil {
			return true, ""
		}
		return false, err.Error()
	})
}
