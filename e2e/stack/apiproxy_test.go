package stack

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// An API proxy forwards a request with the process's impersonation headers to its backend,
// answers a throttled share 429 with or without Retry-After, counts the delayed requests, and
// holds every request while partitioned until Heal.
func TestAPIProxyForwardsThrottlesAndPartitions(t *testing.T) {
	p, client := testAPIProxy(t)
	get := func(ctx context.Context) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/api/v1/pods", nil)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Impersonate-User", "system:serviceaccount:aicr:applier")
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}

	resp, body, err := get(t.Context())
	if err != nil || resp.StatusCode != http.StatusOK || body != "/api/v1/pods as system:serviceaccount:aicr:applier" {
		t.Fatalf("through the proxy: %v %v %q; want 200 with the path and the impersonated user", err, resp, body)
	}

	for _, noRetryAfter := range []float64{0, 1} {
		p.SetThrottle(Throttle{Share: 1, NoRetryAfter: noRetryAfter, MaxLatency: 1})
		resp, body, err = get(t.Context())
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"reason":"TooManyRequests"`) {
			t.Fatalf("throttled: %v %v %q; want a 429 Status", err, resp, body)
		}
		if got, want := resp.Header.Get("Retry-After"), map[float64]string{0: "1", 1: ""}[noRetryAfter]; got != want {
			t.Errorf("throttled with NoRetryAfter %v: Retry-After %q, want %q", noRetryAfter, got, want)
		}
	}
	p.SetThrottle(Throttle{})
	if resp, _, err = get(t.Context()); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("throttle ended: %v %v; want 200", err, resp)
	}
	if throttled, delayed := p.Counts(); throttled != 2 || delayed != 2 {
		t.Errorf("counts: %d throttled, %d delayed; want 2 and 2", throttled, delayed)
	}

	// A watch in flight is ended; a new one is answered 410 Expired while the window lasts.
	watch := func() (*http.Response, *bufio.Reader) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL()+"/api/v1/pods?watch=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf, application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, bufio.NewReader(resp.Body)
	}
	_, r := watch()
	if line, err := r.ReadString('\n'); err != nil || line != `{"type":"ADDED"}`+"\n" {
		t.Fatalf("watch through the proxy: %q, %v", line, err)
	}
	if n := p.ExpireWatches(time.Minute, 0); n != 1 {
		t.Errorf("ExpireWatches ended %d watches, want 1", n)
	}
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("an expired watch went on: %q", line)
	}
	resp, r = watch()
	if line, err := r.ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(line, `"type":"ERROR"`) || !strings.Contains(line, `"code":410`) {
		t.Fatalf("a watch while expiring: %v %q, %v; want an ERROR event of a 410 Status", resp.StatusCode, line, err)
	}
	if p.Expired() != 1 {
		t.Errorf("Expired() = %d, want 1", p.Expired())
	}

	client.CloseIdleConnections()
	p.Partition()
	ctx, cancel := context.WithTimeout(t.Context(), heldFor)
	_, _, err = get(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("partitioned: %v; want the request held until its deadline", err)
	}
	p.Heal()
	if resp, _, err = get(t.Context()); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healed: %v %v; want 200", err, resp)
	}
}

// testAPIProxy starts an API proxy in front of a backend that answers a watch with one ADDED
// event (then holds the stream open), a request with a fail parameter 500, and any other with its
// path and impersonated user,
// and returns it with a client that trusts it.
func testAPIProxy(t *testing.T) (*APIProxy, *http.Client) {
	t.Helper()
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) { // one event, then the stream stays open
			_, _ = io.WriteString(w, `{"type":"ADDED"}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if r.URL.Query().Get("fail") != "" { // an API server that cannot answer
			http.Error(w, "etcdserver: request timed out", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, r.URL.Path+" as "+r.Header.Get("Impersonate-User"))
	}))
	t.Cleanup(backend.Close)
	ca, err := tlstest.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Server("api-proxy-test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newAPIProxy(&rest.Config{Host: backend.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, backend.URL, pair, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	return p, client
}

// After ExpireWatches with a compaction revision, a watch from an older resourceVersion is
// answered 410 Expired whenever it comes, lists or not, as a compaction answers it; a watch from
// the revision on, from "" or "0", or one that sends the initial state first, is served, and
// only such a watch takes the collection off Stale. A later, lower revision does not undo it.
func TestAPIProxyExpiresWatchesFromBeforeTheCompactionForGood(t *testing.T) {
	p, client := testAPIProxy(t)
	watchFrom := func(query string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/api/v1/pods?watch=true"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			t.Fatalf("watch %s: %v", query, err)
		}
		return strings.TrimSpace(line)
	}
	if got := watchFrom("&resourceVersion=5"); got != `{"type":"ADDED"}` {
		t.Fatalf("a watch before any expiry: %s", got)
	}
	p.ExpireWatches(0, 100)
	p.ExpireWatches(0, 50)
	for query, expired := range map[string]bool{
		"&resourceVersion=5":   true,
		"&resourceVersion=99":  true,
		"&resourceVersion=100": false,
		"&resourceVersion=123": false,
		"":                     false,
		"&resourceVersion=0":   false,
		"&resourceVersion=5&sendInitialEvents=true&resourceVersionMatch=NotOlderThan": false,
	} {
		got := watchFrom(query)
		if is := strings.Contains(got, `"code":410`) && strings.Contains(got, `"reason":"Expired"`); is != expired {
			t.Errorf("watch%s: %s; want 410 Expired %v", query, got, expired)
		}
	}
	if got := p.Expired(); got != 2 {
		t.Errorf("Expired() = %d, want 2", got)
	}

	// Lists change nothing: a watch from before the compaction is answered 410 Expired for good,
	// and the collection stays stale until a watch of it is served (from the revision on).
	const pods = "/api/v1/pods?&"
	if got := watchFrom("&resourceVersion=5"); !strings.Contains(got, `"code":410`) { // after the served ones above
		t.Errorf("a watch from before the compaction: %s; want 410 Expired", got)
	}
	if got := p.Stale(); !slices.Equal(got, []string{pods}) {
		t.Errorf("Stale() after a watch from before the compaction = %q, want [%s]", got, pods)
	}
	for _, query := range []string{"?limit=500", "?limit=500&resourceVersion=5", "?limit=500&fail=1"} {
		resp, err := client.Get(p.URL() + "/api/v1/pods" + query)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if got := watchFrom("&resourceVersion=5"); !strings.Contains(got, `"code":410`) {
		t.Errorf("a watch from before the compaction after lists: %s; want 410 Expired", got)
	}
	if got := p.Stale(); !slices.Equal(got, []string{pods}) {
		t.Errorf("Stale() after lists = %q, want [%s]", got, pods)
	}
	if got := watchFrom("&resourceVersion=100"); got != `{"type":"ADDED"}` {
		t.Errorf("a watch from the compaction's revision: %s; want it served", got)
	}
	if got := p.Stale(); len(got) != 0 {
		t.Errorf("Stale() after a served watch = %q, want none", got)
	}
	p.ExpireWatches(0, 200) // a later compaction
	if got := watchFrom("&resourceVersion=150"); !strings.Contains(got, `"code":410`) {
		t.Errorf("a watch from before the second compaction: %s; want 410 Expired", got)
	}
}
