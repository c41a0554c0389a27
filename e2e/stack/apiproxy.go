package stack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// APIProxy stands between one process of a chaos stack and the kube-apiserver, as a load
// balancer or an overloaded API server's priority and fairness would: it ends the process's TLS,
// forwards each request with the environment's admin credentials (the process's impersonation
// headers pass as they are, so the API server sees the same user and instance), and can answer a
// share of the requests 429 and delay every request (Throttle). In front of it a TCP Proxy cuts
// the process off from the API server as a network that drops packets does (Partition), or closes
// its connections and refuses new ones (Reject).
type APIProxy struct {
	front   *Proxy
	ln      net.Listener
	srv     *http.Server
	backend *httputil.ReverseProxy

	mu          sync.Mutex
	rand        *rand.Rand
	throttle    Throttle
	throttled   int // requests answered 429
	delayed     int // requests delayed
	expireUntil time.Time
	// compacted is the revision before which a watch is answered 410 Expired, as after an etcd
	// compaction at it (0: none).
	compacted uint64
	// stale are the collections a watch of was answered 410 Expired and that the process has
	// not watched since with a watch the proxy served: its cache of them follows the API server
	// no more.
	stale   map[string]bool
	expired int                                  // watches answered 410 Expired
	watches map[*http.Request]context.CancelFunc // the watches in flight, to end them
}

// Throttle is what an APIProxy does to each request while set: a share answered 429 Too Many
// Requests, the API server's answer when its priority levels are full (with Retry-After: 1, which
// client-go waits out and retries by itself up to 10 times; NoRetryAfter of those without it, as
// a gateway in between may answer, which reach the process's own code), and every request
// delayed by a random latency in [MinLatency, MaxLatency] before it is forwarded (or refused).
type Throttle struct {
	Share                  float64
	NoRetryAfter           float64
	MinLatency, MaxLatency time.Duration
}

// apiProxyFlushInterval: watch events go to the process as they come.
const apiProxyFlushInterval = -1

// newAPIProxy starts a proxy to the environment's kube-apiserver serving the certificate pair
// (for 127.0.0.1) signed by the stack's API proxy CA.
func newAPIProxy(admin *rest.Config, apiserver string, pair tlstest.Pair, seed uint64) (*APIProxy, error) {
	target, err := url.Parse(apiserver)
	if err != nil {
		return nil, fmt.Errorf("api proxy: %w", err)
	}
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{} // the process's own headers pass through
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("api proxy: transport: %w", err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("api proxy: certificate: %w", err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("api proxy: listen: %w", err)
	}
	p := &APIProxy{ln: ln, rand: rand.New(rand.NewPCG(seed, 7))}
	p.backend = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: apiProxyFlushInterval,
		// A watch ended by a fault, or by a killed API server, is no news for the test's log.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			// The API server is down (a fault of its own): what a load balancer answers.
			http.Error(w, "api proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }() // owned: Close shuts it down
	front, err := newProxyOnFreePort(ln.Addr().String())
	if err != nil {
		_ = p.srv.Close()
		return nil, err
	}
	p.front = front
	return p, nil
}

// URL is where the process reaches the API server.
func (p *APIProxy) URL() string { return "https://" + p.front.Addr() }

// SetThrottle starts throttling (Throttle); the zero Throttle ends it.
func (p *APIProxy) SetThrottle(t Throttle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttle = t
}

// Partition cuts the process off from the API server (Proxy.Silence); Heal joins it again.
func (p *APIProxy) Partition() { p.front.Silence() }

// Reject cuts the process off from the API server as a firewall that rejects does, or a load
// balancer that restarts (Proxy.Cut): every connection closed at once, new ones refused, until
// Heal. A request in flight may have reached the API server and lost only its answer.
func (p *APIProxy) Reject() { p.front.Cut() }

// Heal ends Partition and Reject.
func (p *APIProxy) Heal() { p.front.Heal() }

// ExpireWatches ends every watch in flight through the proxy and, for window, answers every
// new watch with the API server's answer to a watch from a resourceVersion that etcd compacted
// away: an ERROR event of a 410 Expired Status. From then on, as a compaction at revision
// compacted (the current one; 0 for none) does, it also answers so every watch from an older
// resourceVersion (one that streams the changes after it; not a watch of sendInitialEvents,
// nor one from "" or "0"), however late it comes: a client must list again (a forced relist;
// a list answers the current resourceVersion, at or after the compaction) and watch from the
// list's resourceVersion; one that watches again from where it was without listing never gets
// another event, and its collection stays Stale. It returns how many watches it ended.
func (p *APIProxy) ExpireWatches(window time.Duration, compacted uint64) int {
	p.mu.Lock()
	p.expireUntil = time.Now().Add(window)
	p.compacted = max(p.compacted, compacted)
	watches := p.watches
	p.watches = nil
	p.mu.Unlock()
	for _, cancel := range watches {
		cancel()
	}
	return len(watches)
}

// Expired returns how many watches the proxy answered 410 Expired so far.
func (p *APIProxy) Expired() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expired
}

// Stale returns the collections (path?labelSelector&fieldSelector) a watch of was answered 410
// Expired and that the process has not watched since with a watch the proxy served: a client
// that follows the API server lists again and watches from the list soon after (client-go's
// reflector does at once), so one that stays here is a cache that no longer sees changes.
// Sorted.
func (p *APIProxy) Stale() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.stale))
	for c := range p.stale {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// newProcess forgets what the instance's previous process left stale: a new one starts with no
// cache.
func (p *APIProxy) newProcess() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale = nil
}

// Counts returns how many requests were answered 429 and how many were delayed so far.
func (p *APIProxy) Counts() (throttled, delayed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.throttled, p.delayed
}

// Close stops the proxy and closes its connections.
func (p *APIProxy) Close() {
	p.front.Close()
	_ = p.srv.Close()
}

func (p *APIProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	t := p.throttle
	var delay time.Duration
	refuse, retryAfter := false, true
	if t.MaxLatency > 0 {
		delay = t.MinLatency + time.Duration(p.rand.Int64N(int64(t.MaxLatency-t.MinLatency)+1))
		p.delayed++
	}
	if t.Share > 0 && p.rand.Float64() < t.Share {
		refuse = true
		retryAfter = p.rand.Float64() >= t.NoRetryAfter
		p.throttled++
	}
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if refuse {
		if retryAfter {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many requests, please try again later (chaos: api proxy)","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`)
		return
	}
	if !isWatch(r) {
		p.backend.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	if (time.Now().Before(p.expireUntil) || compactedAway(r, p.compacted)) && acceptsJSON(r) {
		p.expired++
		if p.stale == nil {
			p.stale = map[string]bool{}
		}
		p.stale[collection(r)] = true
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintln(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version (chaos: api proxy, as after an etcd compaction)","reason":"Expired","code":410}}`)
		return
	}
	delete(p.stale, collection(r)) // served: from a list's resourceVersion, or the current state
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	if p.watches == nil {
		p.watches = map[*http.Request]context.CancelFunc{}
	}
	p.watches[r] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watches, r)
		p.mu.Unlock()
	}()
	p.backend.ServeHTTP(w, r)
}

// isWatch reports whether r asks for a watch (client-go: ?watch=true).
func isWatch(r *http.Request) bool {
	switch r.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

// compactedAway reports whether watch r streams the changes after a resourceVersion older than
// compacted, which a compaction at compacted removed: the API server answers it 410 Expired. A
// watch that sends the initial state first (sendInitialEvents, a watch-list) or starts from ""
// or "0" reads the current state and is served.
func compactedAway(r *http.Request, compacted uint64) bool {
	q := r.URL.Query()
	if compacted == 0 || q.Get("sendInitialEvents") == "true" {
		return false
	}
	rv, err := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	return err == nil && rv > 0 && rv < compacted
}

// collection names what a list or watch reads: its path and selectors.
func collection(r *http.Request) string {
	q := r.URL.Query()
	return r.URL.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector")
}

// acceptsJSON reports whether the client reads a JSON answer (client-go asks for protobuf with
// JSON as the fallback): the expired answer is JSON.
func acceptsJSON(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return a == "" || strings.Contains(a, "json") || strings.Contains(a, "*/*")
}

// apiProxyCA writes (once) the CA every API proxy's certificate is signed with, and returns it.
func (s *Stack) apiProxyCA() (*tlstest.CA, []byte, error) {
	c := s.opts.Chaos
	if c.apiCA != nil {
		return c.apiCA, c.apiCAPEM, nil
	}
	ca, err := tlstest.NewCA("aicr-chaos-api-proxy")
	if err != nil {
		return nil, nil, err
	}
	pemBytes := ca.CertPEM
	if err := os.WriteFile(filepath.Join(s.Dir, "api-proxy-ca.crt"), pemBytes, 0o600); err != nil {
		return nil, nil, fmt.Errorf("write api proxy CA: %w", err)
	}
	c.apiCA, c.apiCAPEM = ca, pemBytes
	return ca, pemBytes, nil
}

// apiProxyFor returns the API proxy of instance for a process of it about to start, starting
// the proxy the first time: the instance keeps its proxy across restarts, and a new process
// starts with no cache, so none of its collections is stale.
func (s *Stack) apiProxyFor(instance string) (*APIProxy, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.opts.Chaos
	ca, caPEM, err := s.apiProxyCA()
	if err != nil {
		return nil, nil, err
	}
	if p := c.apiProxies[instance]; p != nil {
		p.newProcess()
		return p, caPEM, nil
	}
	pair, err := ca.Server("api-proxy-" + instance)
	if err != nil {
		return nil, nil, err
	}
	p, err := newAPIProxy(s.Env.Config, s.Env.APIServerURL, pair, uint64(len(c.apiProxies))+1)
	if err != nil {
		return nil, nil, err
	}
	if c.apiProxies == nil {
		c.apiProxies = map[string]*APIProxy{}
	}
	c.apiProxies[instance] = p
	return p, caPEM, nil
}

// APIProxy returns the API proxy of an instance of a chaos stack (ChaosOptions.APIProxies).
func (s *Stack) APIProxy(instance string) (*APIProxy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Chaos == nil || s.opts.Chaos.apiProxies[instance] == nil {
		return nil, errors.New("api proxy of " + instance + ": none (ChaosOptions.APIProxies)")
	}
	return s.opts.Chaos.apiProxies[instance], nil
}
