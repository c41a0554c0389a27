package ociregistry

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Credentials are a registry login; both empty is anonymous. ECR's is "AWS" and a token.
type Credentials struct {
	Username string
	Password string
}

func (c Credentials) anonymous() bool { return c.Username == "" && c.Password == "" }

// Options configure a Client.
type Options struct {
	// HTTPClient sends the requests; a client with a 2-minute timeout and TLS when nil.
	HTTPClient *http.Client
	// TLS configures https:// when HTTPClient is nil (the CA bundle to trust, a client
	// certificate, InsecureSkipVerify for Argo CD's insecure); the system's roots when nil.
	TLS *tls.Config
	// PlainHTTP talks http:// to the registry (a local or test registry, Argo CD's
	// insecureOCIForceHttp); https:// otherwise.
	PlainHTTP bool
	// Credentials are sent when the registry asks for them (basic) or to its token endpoint.
	Credentials Credentials
	// UserAgent is sent with every request when set.
	UserAgent string
}

// DefaultMaxManifestBytes is the manifest limit when a caller gives none: the size the
// distribution spec says registries should accept at least.
const DefaultMaxManifestBytes = 4 << 20

// Accepted manifest types when resolving or pulling.
var manifestAccept = MediaTypeImageManifest + ", " + MediaTypeImageIndex + ", " +
	"application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json"

// Client talks to OCI registries. It keeps the authorization it obtained (per host and scope) so
// a push of many blobs asks for a token once; it is safe for concurrent use. Make a new Client
// when the credentials change.
type Client struct {
	opts Options
	http *http.Client

	mu   sync.Mutex
	auth map[string]string // host + " " + scope -> Authorization header
}

// New returns a Client.
func New(opts Options) *Client {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
		if opts.TLS != nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = opts.TLS
			hc.Transport = tr
		}
	}
	return &Client{opts: opts, http: hc, auth: map[string]string{}}
}

func (c *Client) scheme() string {
	if c.opts.PlainHTTP {
		return "http"
	}
	return "https"
}

func (c *Client) url(repo Repository, kind, ref string) string {
	return c.scheme() + "://" + repo.Host + "/v2/" + repo.Name + "/" + kind + "/" + ref
}

func pullScope(repo Repository) string { return "repository:" + repo.Name + ":pull" }
func pushScope(repo Repository) string { return "repository:" + repo.Name + ":pull,push" }

// request describes one HTTP request; body is replayable so it can be sent again after an
// authentication challenge.
type request struct {
	method  string
	url     string
	body    []byte
	headers map[string]string
}

// do sends r, answering one authentication challenge (basic or bearer) and retrying. op and ref
// name the operation in errors. The caller closes the response body.
func (c *Client) do(ctx context.Context, op, ref string, repo Repository, scope string, r request) (*http.Response, error) {
	key := repo.Host + " " + scope
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, r.method, r.url, bytes.NewReader(r.body))
		if err != nil {
			return nil, &Error{Op: op, Ref: ref, Err: err}
		}
		if r.body == nil {
			req.Body = http.NoBody
		}
		req.ContentLength = int64(len(r.body))
		for k, v := range r.headers {
			req.Header.Set(k, v)
		}
		if c.opts.UserAgent != "" {
			req.Header.Set("User-Agent", c.opts.UserAgent)
		}
		c.mu.Lock()
		authz := c.auth[key]
		c.mu.Unlock()
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, &Error{Op: op, Ref: ref, Err: err}
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 {
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		e := statusError(op, ref, resp)
		drain(resp)
		authz, err = c.authorize(ctx, op, ref, scope, challenge)
		if err != nil {
			return nil, err
		}
		if authz == "" {
			if c.opts.Credentials.anonymous() {
				e.Detail = "the registry needs credentials and none were given"
			}
			return nil, e
		}
		c.mu.Lock()
		c.auth[key] = authz
		c.mu.Unlock()
	}
}

// drain reads a little of an unwanted body and closes it so the connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBody)
	_ = resp.Body.Close()
}

// expect returns an *Error for resp unless its status is one of want; the body is closed then.
func expect(op, ref string, resp *http.Response, want ...int) error {
	for _, w := range want {
		if resp.StatusCode == w {
			return nil
		}
	}
	defer drain(resp)
	return statusError(op, ref, resp)
}

// readLimited reads at most limit bytes of resp's body and verifies they hash to digest (when
// given). The body is closed.
func readLimited(op, ref string, resp *http.Response, limit int64, digest string) ([]byte, error) {
	defer drain(resp)
	if resp.ContentLength > limit {
		return nil, &Error{Op: op, Ref: ref, Kind: ErrTooLarge,
			Detail: fmt.Sprintf("%d bytes, the limit is %d", resp.ContentLength, limit)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &Error{Op: op, Ref: ref, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, &Error{Op: op, Ref: ref, Kind: ErrTooLarge,
			Detail: fmt.Sprintf("more than %d bytes, the limit", limit)}
	}
	if digest != "" {
		if got := Digest(b); got != digest {
			return nil, &Error{Op: op, Ref: ref, Kind: ErrDigestMismatch,
				Detail: fmt.Sprintf("the content's digest is %s", got)}
		}
	}
	return b, nil
}

// BlobExists says whether repo has the blob.
func (c *Client) BlobExists(ctx context.Context, repo Repository, digest string) (bool, error) {
	ref := repo.String() + "@" + digest
	resp, err := c.do(ctx, "check blob", ref, repo, pullScope(repo),
		request{method: http.MethodHead, url: c.url(repo, "blobs", digest)})
	if err != nil {
		return false, err
	}
	if resp.StatusCode == http.StatusNotFound {
		drain(resp)
		return false, nil
	}
	if err := expect("check blob", ref, resp, http.StatusOK); err != nil {
		return false, err
	}
	drain(resp)
	return true, nil
}

// PushBlob uploads data to repo (monolithically: one POST and one PUT) unless the registry has
// it already, and returns its descriptor (mediaType as given).
func (c *Client) PushBlob(ctx context.Context, repo Repository, mediaType string, data []byte) (Descriptor, error) {
	desc := Descriptor{MediaType: mediaType, Digest: Digest(data), Size: int64(len(data))}
	ref := repo.String() + "@" + desc.Digest
	ok, err := c.BlobExists(ctx, repo, desc.Digest)
	if err != nil {
		return Descriptor{}, err
	}
	if ok {
		return desc, nil
	}
	start := c.scheme() + "://" + repo.Host + "/v2/" + repo.Name + "/blobs/uploads/"
	resp, err := c.do(ctx, "push blob", ref, repo, pushScope(repo), request{method: http.MethodPost, url: start})
	if err != nil {
		return Descriptor{}, err
	}
	if err := expect("push blob", ref, resp, http.StatusAccepted); err != nil {
		return Descriptor{}, err
	}
	loc := resp.Header.Get("Location")
	drain(resp)
	upload, err := resolveLocation(start, loc)
	if err != nil {
		return Descriptor{}, &Error{Op: "push blob", Ref: ref, Err: err}
	}
	q := upload.Query()
	q.Set("digest", desc.Digest)
	upload.RawQuery = q.Encode()
	resp, err = c.do(ctx, "push blob", ref, repo, pushScope(repo), request{
		method: http.MethodPut, url: upload.String(), body: data,
		headers: map[string]string{"Content-Type": "application/octet-stream"},
	})
	if err != nil {
		return Descriptor{}, err
	}
	if err := expect("push blob", ref, resp, http.StatusCreated); err != nil {
		return Descriptor{}, err
	}
	drain(resp)
	return desc, nil
}

// resolveLocation resolves an upload Location (often relative) against the request URL.
func resolveLocation(base, loc string) (*url.URL, error) {
	if loc == "" {
		return nil, fmt.Errorf("the registry gave no upload Location")
	}
	b, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	l, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("upload Location %q: %w", loc, err)
	}
	return b.ResolveReference(l), nil
}

// PushManifest puts a manifest under reference (a tag, or its digest for an untagged push) and
// returns its descriptor. A registry that reports another digest than the content's is an error.
func (c *Client) PushManifest(ctx context.Context, repo Repository, reference, mediaType string, data []byte) (Descriptor, error) {
	desc := Descriptor{MediaType: mediaType, Digest: Digest(data), Size: int64(len(data))}
	reference = cmp.Or(reference, desc.Digest)
	ref := repo.String() + ":" + reference
	if ValidateDigest(reference) == nil {
		ref = repo.String() + "@" + reference
	}
	resp, err := c.do(ctx, "push manifest", ref, repo, pushScope(repo), request{
		method: http.MethodPut, url: c.url(repo, "manifests", reference), body: data,
		headers: map[string]string{"Content-Type": mediaType},
	})
	if err != nil {
		return Descriptor{}, err
	}
	if err := expect("push manifest", ref, resp, http.StatusCreated); err != nil {
		return Descriptor{}, err
	}
	got := resp.Header.Get("Docker-Content-Digest")
	drain(resp)
	if got != "" && got != desc.Digest {
		return Descriptor{}, &Error{Op: "push manifest", Ref: ref, Kind: ErrDigestMismatch,
			Detail: fmt.Sprintf("the registry stored %s, the content is %s", got, desc.Digest)}
	}
	return desc, nil
}

// Resolve returns the descriptor of the manifest ref's tag (or digest) names: HEAD, and a GET
// when the registry gives no Docker-Content-Digest.
func (c *Client) Resolve(ctx context.Context, ref Reference) (Descriptor, error) {
	target := cmp.Or(ref.Digest, ref.Tag)
	if target == "" {
		return Descriptor{}, &Error{Op: "resolve", Ref: ref.String(), Detail: "a tag or digest is required"}
	}
	resp, err := c.do(ctx, "resolve", ref.String(), ref.Repository, pullScope(ref.Repository), request{
		method: http.MethodHead, url: c.url(ref.Repository, "manifests", target),
		headers: map[string]string{"Accept": manifestAccept},
	})
	if err != nil {
		return Descriptor{}, err
	}
	if err := expect("resolve", ref.String(), resp, http.StatusOK); err != nil {
		return Descriptor{}, err
	}
	drain(resp)
	desc := Descriptor{MediaType: mediaTypeOf(resp), Digest: resp.Header.Get("Docker-Content-Digest"), Size: resp.ContentLength}
	if ValidateDigest(desc.Digest) == nil && (ref.Digest == "" || desc.Digest == ref.Digest) {
		return desc, nil
	}
	// no (or an unusable) digest header: read the manifest and hash it
	b, mt, err := c.getManifest(ctx, ref.Repository, target, ref.String(), DefaultMaxManifestBytes, ref.Digest)
	if err != nil {
		return Descriptor{}, err
	}
	return Descriptor{MediaType: mt, Digest: Digest(b), Size: int64(len(b))}, nil
}

func mediaTypeOf(resp *http.Response) string {
	mt := resp.Header.Get("Content-Type")
	if i := bytes.IndexByte([]byte(mt), ';'); i >= 0 {
		mt = mt[:i]
	}
	return mt
}

// FetchManifest reads the manifest of repo with digest, at most limit bytes
// (DefaultMaxManifestBytes when 0), verifies it hashes to digest and returns it with its media
// type.
func (c *Client) FetchManifest(ctx context.Context, repo Repository, digest string, limit int64) ([]byte, string, error) {
	ref := repo.String() + "@" + digest
	if err := ValidateDigest(digest); err != nil {
		return nil, "", &Error{Op: "pull manifest", Ref: ref, Err: err}
	}
	if limit <= 0 {
		limit = DefaultMaxManifestBytes
	}
	return c.getManifest(ctx, repo, digest, ref, limit, digest)
}

func (c *Client) getManifest(ctx context.Context, repo Repository, target, ref string, limit int64, digest string) ([]byte, string, error) {
	resp, err := c.do(ctx, "pull manifest", ref, repo, pullScope(repo), request{
		method: http.MethodGet, url: c.url(repo, "manifests", target),
		headers: map[string]string{"Accept": manifestAccept},
	})
	if err != nil {
		return nil, "", err
	}
	if err := expect("pull manifest", ref, resp, http.StatusOK); err != nil {
		return nil, "", err
	}
	mt := mediaTypeOf(resp)
	b, err := readLimited("pull manifest", ref, resp, limit, digest)
	if err != nil {
		return nil, "", err
	}
	return b, mt, nil
}

// FetchBlob reads the blob of repo with digest, at most limit bytes (required, > 0), and
// verifies it hashes to digest.
func (c *Client) FetchBlob(ctx context.Context, repo Repository, digest string, limit int64) ([]byte, error) {
	ref := repo.String() + "@" + digest
	if err := ValidateDigest(digest); err != nil {
		return nil, &Error{Op: "pull blob", Ref: ref, Err: err}
	}
	if limit <= 0 {
		return nil, &Error{Op: "pull blob", Ref: ref, Detail: "a size limit is required, got " + strconv.FormatInt(limit, 10)}
	}
	resp, err := c.do(ctx, "pull blob", ref, repo, pullScope(repo), request{method: http.MethodGet, url: c.url(repo, "blobs", digest)})
	if err != nil {
		return nil, err
	}
	if err := expect("pull blob", ref, resp, http.StatusOK); err != nil {
		return nil, err
	}
	return readLimited("pull blob", ref, resp, limit, digest)
}
