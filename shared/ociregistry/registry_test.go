package ociregistry

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeRegistry is an in-memory registry speaking enough of the distribution API for the client:
// blob HEAD/GET, monolithic upload (POST then PUT ?digest=), manifest PUT/HEAD/GET by tag or
// digest, with no auth, basic auth, or the token flow.
type fakeRegistry struct {
	t    *testing.T
	srv  *httptest.Server
	auth string // "", "basic", "bearer"
	user string
	pass string

	mu        sync.Mutex
	blobs     map[string][]byte
	manifests map[string][]byte // by digest
	types     map[string]string // digest -> media type
	tags      map[string]string // name:tag -> digest
	tokens    map[string]string // token -> scope
	tokenHits int
	// tamper, when set, changes what GET returns for blobs and manifests
	tamper func([]byte) []byte
	// chunked answers GETs without Content-Length
	chunked bool
	// noDigestHeader leaves Docker-Content-Digest out of manifest answers
	noDigestHeader bool
	// reportDigest, when set, is the Docker-Content-Digest a manifest PUT answers
	reportDigest string
	lastService  string
	lastScopes   []string
}

func newFakeRegistry(t *testing.T, auth, user, pass string) *fakeRegistry {
	f := &fakeRegistry{t: t, auth: auth, user: user, pass: pass,
		blobs: map[string][]byte{}, manifests: map[string][]byte{}, types: map[string]string{},
		tags: map[string]string{}, tokens: map[string]string{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegistry) host() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeRegistry) client(cr Credentials) *Client {
	return New(Options{PlainHTTP: true, Credentials: cr, HTTPClient: f.srv.Client()})
}

func (f *fakeRegistry) basicOK(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && u == f.user && p == f.pass
}

func regError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, msg)
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/token" {
		f.tokenHits++
		f.lastService = r.URL.Query().Get("service")
		f.lastScopes = r.URL.Query()["scope"]
		if !f.basicOK(r) {
			regError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad login")
			return
		}
		tok := "tok" + strconv.Itoa(f.tokenHits)
		f.tokens[tok] = strings.Join(f.lastScopes, " ")
		fmt.Fprintf(w, `{"token":%q}`, tok)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	push := r.Method == http.MethodPost || r.Method == http.MethodPut
	name, kind, ref := splitPath(rest)
	switch f.auth {
	case "basic":
		if !f.basicOK(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
			regError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
			return
		}
	case "bearer":
		action := "pull"
		if push {
			action = "pull,push"
		}
		scope := "repository:" + name + ":" + action
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if granted, ok := f.tokens[tok]; !ok || !strings.Contains(granted, scope) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="fake.test",scope="%s"`, f.srv.URL, scope))
			regError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
			return
		}
	}
	switch {
	case kind == "blobs" && ref == "uploads/" && r.Method == http.MethodPost:
		w.Header().Set("Location", "/v2/"+name+"/blobs/uploads/session-1?state=x")
		w.WriteHeader(http.StatusAccepted)
	case kind == "blobs" && strings.HasPrefix(ref, "uploads/") && r.Method == http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		d := r.URL.Query().Get("digest")
		if r.URL.Query().Get("state") != "x" || d != Digest(body) {
			regError(w, http.StatusBadRequest, "DIGEST_INVALID", "digest does not match")
			return
		}
		f.blobs[d] = body
		w.WriteHeader(http.StatusCreated)
	case kind == "blobs":
		b, ok := f.blobs[ref]
		if !ok {
			regError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return
		}
		f.write(w, r, "application/octet-stream", b)
	case kind == "manifests" && r.Method == http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		d := Digest(body)
		f.manifests[d] = body
		f.types[d] = r.Header.Get("Content-Type")
		if ValidateDigest(ref) != nil {
			f.tags[name+":"+ref] = d
		}
		w.Header().Set("Docker-Content-Digest", cmp.Or(f.reportDigest, d))
		w.WriteHeader(http.StatusCreated)
	case kind == "manifests":
		d := ref
		if ValidateDigest(ref) != nil {
			d = f.tags[name+":"+ref]
		}
		b, ok := f.manifests[d]
		if !ok {
			regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
			return
		}
		if !f.noDigestHeader {
			w.Header().Set("Docker-Content-Digest", d)
		}
		f.write(w, r, f.types[d], b)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeRegistry) write(w http.ResponseWriter, r *http.Request, mediaType string, b []byte) {
	if f.tamper != nil {
		b = f.tamper(b)
	}
	w.Header().Set("Content-Type", mediaType)
	if !f.chunked {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
		if f.chunked {
			w.(http.Flusher).Flush()
		}
	}
}

// splitPath splits "a/b/manifests/ref" into name, kind and ref.
func splitPath(p string) (name, kind, ref string) {
	for _, k := range []string{"/manifests/", "/blobs/"} {
		if i := strings.Index(p, k); i >= 0 {
			return p[:i], strings.Trim(k, "/"), p[i+len(k):]
		}
	}
	return p, "", ""
}
