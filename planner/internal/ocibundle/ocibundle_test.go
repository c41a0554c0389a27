package ocibundle

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// registry serves bundle artifacts read-only behind basic auth (user "AWS", password goodToken),
// the shape of an ECR login; tamper changes every blob it serves.
type registry struct {
	srv    *httptest.Server
	mu     sync.Mutex
	blobs  map[string][]byte // "name@digest" -> content (manifests and blobs)
	tamper bool
}

func newRegistry(t *testing.T) *registry {
	r := &registry{blobs: map[string][]byte{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// newTLSRegistry is a registry speaking HTTPS (trusted by r.srv.Client()).
func newTLSRegistry(t *testing.T) *registry {
	r := &registry{blobs: map[string][]byte{}}
	r.srv = httptest.NewTLSServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *registry) host() string {
	return strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "http://"), "https://")
}

// add stores doc as a bundle artifact under name and returns its spec.bundle.oci.
func (r *registry) add(name, doc string) *v1alpha1.OCIBundleSource {
	a := ociregistry.BundleArtifact([]byte(doc))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobs[name+"@"+a.Digest()] = a.Manifest
	for _, b := range a.Blobs {
		r.blobs[name+"@"+ociregistry.Digest(b.Data)] = b.Data
	}
	return &v1alpha1.OCIBundleSource{Repository: r.host() + "/" + name, Digest: a.Digest()}
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if u, p, ok := req.BasicAuth(); !ok || u != "AWS" || p != goodToken {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
		return
	}
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	var name, digest string
	for _, kind := range []string{"/manifests/", "/blobs/"} {
		if i := strings.Index(path, kind); i >= 0 {
			name, digest = path[:i], path[i+len(kind):]
		}
	}
	r.mu.Lock()
	b, ok := r.blobs[name+"@"+digest]
	tamper := r.tamper
	r.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
		return
	}
	if strings.Contains(req.URL.Path, "/manifests/") {
		w.Header().Set("Content-Type", ociregistry.MediaTypeImageManifest)
	} else if tamper {
		b = append([]byte("# changed\n"), b...)
	}
	_, _ = w.Write(b)
}

// secrets is a repo-creds Secret that a test changes between pulls.
type secrets struct {
	mu  sync.Mutex
	sec *corev1.Secret
	err error
}

func (s *secrets) get(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if s.sec == nil || s.sec.Namespace != namespace || s.sec.Name != name {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return s.sec.DeepCopy(), nil
}

func (s *secrets) set(url, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sec = &corev1.Secret{Data: map[string][]byte{
		KeyURL: []byte(url), KeyUsername: []byte("AWS"), KeyPassword: []byte(password), KeyInsecureOCIForceHTTP: []byte("true"),
	}}
	s.sec.Namespace, s.sec.Name = "argocd", "aicr-registry"
}

// The registry's password (an ECR token) and an expired one.
const (
	goodToken = "ecr-t0ken-current"
	oldToken  = "ecr-t0ken-expired"
)

const doc = "apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: gpu-stack, version: 1.0.0}\ncomponents: []\n"

func newPuller(s *secrets, cfg Config) *Puller {
	cfg.Secrets, cfg.SecretNamespace, cfg.SecretName = s.get, "argocd", "aicr-registry"
	return New(cfg)
}

// wantPlanError checks err is a *plan.Error with reason and field, whose message holds want and
// never the password.
func wantPlanError(t *testing.T, err error, reason, field, want string) {
	t.Helper()
	var pe *plan.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *plan.Error", err)
	}
	if pe.Reason != reason || pe.Field != field || !strings.Contains(pe.Message, want) {
		t.Fatalf("err = %s %s: %s\nwant %s %s holding %q", pe.Reason, pe.Field, pe.Message, reason, field, want)
	}
	for _, secret := range []string{goodToken, oldToken} {
		if strings.Contains(pe.Message, secret) {
			t.Fatalf("message %q holds a credential", pe.Message)
		}
	}
}

func TestPullReadsTheSecretAtEveryPull(t *testing.T) {
	reg := newRegistry(t)
	s := &secrets{}
	s.set("oci://"+reg.host()+"/aicr", goodToken)
	p := newPuller(s, Config{})
	ctx := context.Background()

	v1 := reg.add("aicr/bundles/gpu-stack", doc)
	got, err := p.Pull(ctx, v1)
	if err != nil || string(got) != doc {
		t.Fatalf("pull v1: %q, %v", got, err)
	}
	// the token expired and the Secret holds an old one: the next pull (a new digest) says so
	s.set("oci://"+reg.host()+"/aicr", oldToken)
	v2 := reg.add("aicr/bundles/gpu-stack", doc+"# v2\n")
	_, err = p.Pull(ctx, v2)
	wantPlanError(t, err, v1alpha1.ReasonUnauthorized, "spec.bundle.oci.repository", "with the credentials of the repo-creds Secret argocd/aicr-registry")
	// the refresher wrote a fresh token: the same pull now succeeds, with no restart
	s.set("oci://"+reg.host()+"/aicr", goodToken)
	if got, err := p.Pull(ctx, v2); err != nil || string(got) != doc+"# v2\n" {
		t.Fatalf("pull v2 after the refresh: %q, %v", got, err)
	}
	// v1 is cached by its digest: no registry request, whatever the Secret says now
	s.set("oci://"+reg.host()+"/aicr", oldToken)
	pulls := p.Pulls()
	if got, err := p.Pull(ctx, v1); err != nil || string(got) != doc || p.Pulls() != pulls {
		t.Fatalf("pull v1 again: %q, %v, %d registry pulls (want the cache)", got, err, p.Pulls()-pulls)
	}
}

func TestPullErrors(t *testing.T) {
	reg := newRegistry(t)
	good := reg.add("aicr/bundles/gpu-stack", doc)
	missing := *good
	missing.Digest = ociregistry.Digest([]byte("nothing"))
	outside := reg.add("elsewhere/gpu-stack", doc)
	tests := map[string]struct {
		secret    func(s *secrets)
		src       *v1alpha1.OCIBundleSource
		limit     int64
		tamper    bool
		reason    string
		field     string
		wantInMsg string
	}{
		"not found": {
			src: &missing, reason: v1alpha1.ReasonBundleNotFound, field: "spec.bundle.oci.digest",
			wantInMsg: "MANIFEST_UNKNOWN",
		},
		"a repository outside the Secret's url gets no credentials": {
			src: outside, reason: v1alpha1.ReasonUnauthorized, field: "spec.bundle.oci.repository",
			wantInMsg: "is not under the url oci://" + reg.host() + "/aicr of the repo-creds Secret argocd/aicr-registry",
		},
		"a Secret without a login: anonymous": {
			secret: func(s *secrets) { delete(s.sec.Data, KeyUsername); delete(s.sec.Data, KeyPassword) }, src: good,
			reason: v1alpha1.ReasonUnauthorized, field: "spec.bundle.oci.repository",
			wantInMsg: "anonymously (the repo-creds Secret argocd/aicr-registry holds no username or password)",
		},
		"the Secret may not be read": {
			secret: func(s *secrets) {
				s.err = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "aicr-registry", errors.New("rbac"))
			},
			src: good, reason: v1alpha1.ReasonUnauthorized, field: "spec.bundle.oci.repository",
			wantInMsg: "the planner may not read the repo-creds Secret argocd/aicr-registry",
		},
		"too large": {
			src: good, limit: int64(len(doc)) - 1, reason: v1alpha1.ReasonContentTooLarge, field: "spec.bundle.oci",
			wantInMsg: "a bundle document may be at most",
		},
		"digest mismatch": {
			src: good, tamper: true, reason: v1alpha1.ReasonBundleDigestMismatch, field: "spec.bundle.oci.digest",
			wantInMsg: "the registry served other content than the digest names",
		},
		"a repository that is no repository": {
			src: &v1alpha1.OCIBundleSource{Repository: "oci-only", Digest: good.Digest}, reason: v1alpha1.ReasonBundleInvalid,
			field: "spec.bundle.oci.repository", wantInMsg: "host[:port]/name is required",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &secrets{}
			s.set("oci://"+reg.host()+"/aicr/", goodToken)
			if tc.secret != nil {
				tc.secret(s)
			}
			reg.mu.Lock()
			reg.tamper = tc.tamper
			reg.mu.Unlock()
			defer func() { reg.mu.Lock(); reg.tamper = false; reg.mu.Unlock() }()
			_, err := newPuller(s, Config{Limit: tc.limit}).Pull(context.Background(), tc.src)
			wantPlanError(t, err, tc.reason, tc.field, tc.wantInMsg)
		})
	}
}

func TestPullWithoutSecretIsAnonymousOverHTTPS(t *testing.T) {
	reg := newTLSRegistry(t)
	src := reg.add("aicr/b", doc)
	p := newPuller(&secrets{}, Config{HTTPClient: reg.srv.Client()})
	_, err := p.Pull(context.Background(), src)
	wantPlanError(t, err, v1alpha1.ReasonUnauthorized, "spec.bundle.oci.repository",
		"anonymously (the repo-creds Secret argocd/aicr-registry does not exist)")
}

func TestCacheIsBounded(t *testing.T) {
	reg := newRegistry(t)
	s := &secrets{}
	s.set("oci://"+reg.host(), goodToken)
	p := newPuller(s, Config{CacheEntries: 2})
	ctx := context.Background()
	var srcs []*v1alpha1.OCIBundleSource
	for _, v := range []string{"1", "2", "3"} {
		src := reg.add("b", doc+"# "+v+"\n")
		srcs = append(srcs, src)
		if _, err := p.Pull(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	// 3 and 2 are cached; 1 was evicted and is pulled again
	if _, err := p.Pull(ctx, srcs[2]); err != nil || p.Pulls() != 3 {
		t.Fatalf("pull the newest again: %v, %d pulls; want 3 (cached)", err, p.Pulls())
	}
	if _, err := p.Pull(ctx, srcs[0]); err != nil || p.Pulls() != 4 {
		t.Fatalf("pull the evicted one: %v, %d pulls; want 4", err, p.Pulls())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.order.Len() != 2 || len(p.byKey) != 2 {
		t.Fatalf("cache holds %d entries, want 2", p.order.Len())
	}
}
