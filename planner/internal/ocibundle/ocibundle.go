// Package ocibundle pulls the bundle a ClusterRuntime names with spec.bundle.oci: the bundle
// artifact (shared/ociregistry's BundleArtifact) at repository@digest, with the credentials
// of the repo-creds Secret the operator keeps for Argo CD when the repository is under that
// Secret's url. The Secret is read at every pull, so a token the credential refresher renewed is
// used at once. What was pulled is verified against its digest (so it is cached by digest, in a
// bounded cache) and limited in size. Every failure is a *plan.Error whose reason and field say
// what the registry answered.
package ocibundle

import (
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Data keys of the repo-creds Secret (Argo CD's repository credential template).
const (
	KeyURL                  = "url"
	KeyUsername             = "username"
	KeyPassword             = "password"
	KeyInsecureOCIForceHTTP = "insecureOCIForceHttp"
	// KeyInsecure skips the verification of the registry's certificate (Argo CD's insecure).
	KeyInsecure = "insecure"
	// KeyTLSClientCertData and KeyTLSClientCertKey are the client certificate and its key, PEM,
	// presented to the registry (Argo CD's repository credentials).
	KeyTLSClientCertData = "tlsClientCertData"
	KeyTLSClientCertKey  = "tlsClientCertKey"
)

// Cache bounds: bundles are at most plan.MaxBundleBytes each.
const (
	DefaultCacheEntries = 16
	DefaultCacheBytes   = 64 << 20
)

// Fields named in errors.
const (
	fieldRepository = "spec.bundle.oci.repository"
	fieldDigest     = "spec.bundle.oci.digest"
	fieldSource     = "spec.bundle.oci"
)

// SecretGetter reads one Secret.
type SecretGetter func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// Config says where the credentials are and how much is pulled.
type Config struct {
	// Secrets reads the repo-creds Secret.
	Secrets SecretGetter
	// SecretNamespace and SecretName name the repo-creds Secret (Argo CD's namespace,
	// registry.auth.repoCredsSecret).
	SecretNamespace, SecretName string
	// HTTPClient sends the registry requests (ociregistry's default, with the TLS below, when
	// nil).
	HTTPClient *http.Client
	// RootCAs are the certificate authorities a registry's certificate is verified against (the
	// system's and a mounted CA bundle, --registry-ca-file); the system's when nil.
	RootCAs *x509.CertPool
	// Limit is the largest bundle document pulled; plan.MaxBundleBytes when zero, the limit
	// a bundle read from a ConfigMap has too.
	Limit int64
	// CacheEntries and CacheBytes bound the cache (DefaultCacheEntries, DefaultCacheBytes when
	// zero).
	CacheEntries int
	CacheBytes   int64
}

// Puller pulls bundle artifacts. It is safe for concurrent use.
type Puller struct {
	cfg   Config
	mu    sync.Mutex
	order *list.List // of *entry, most recently used first
	byKey map[string]*list.Element
	bytes int64
	pulls int // registry pulls made (cache misses), for tests
}

type entry struct {
	key  string
	data []byte
}

// New returns a Puller.
func New(cfg Config) *Puller {
	if cfg.Limit <= 0 {
		cfg.Limit = plan.MaxBundleBytes
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = DefaultCacheEntries
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	return &Puller{cfg: cfg, order: list.New(), byKey: map[string]*list.Element{}}
}

// Pulls is how many times the registry was asked for a bundle (cache misses).
func (p *Puller) Pulls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pulls
}

// Pull returns the bundle document src names, from the cache when it was pulled before (its
// digest pins the content). A failure is a *plan.Error.
func (p *Puller) Pull(ctx context.Context, src *v1alpha1.OCIBundleSource) ([]byte, error) {
	repo, err := ociregistry.ParseRepository(src.Repository)
	if err != nil {
		return nil, &plan.Error{Reason: v1alpha1.ReasonBundleInvalid, Field: fieldRepository, Message: err.Error()}
	}
	if err := ociregistry.ValidateDigest(src.Digest); err != nil {
		return nil, &plan.Error{Reason: v1alpha1.ReasonBundleInvalid, Field: fieldDigest, Message: err.Error()}
	}
	key := repo.String() + "@" + src.Digest
	if data, ok := p.cached(key); ok {
		return data, nil
	}
	opts, login, err := p.options(ctx, repo)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.pulls++
	p.mu.Unlock()
	data, err := ociregistry.New(opts).PullBundle(ctx, repo, src.Digest, p.cfg.Limit)
	if err != nil {
		return nil, p.explain(key, login, err)
	}
	p.add(key, data)
	return data, nil
}

// options reads the repo-creds Secret now and returns the client options for repo, and how the
// pull logs in (for messages: never the credentials themselves).
func (p *Puller) options(ctx context.Context, repo ociregistry.Repository) (ociregistry.Options, string, error) {
	opts := ociregistry.Options{HTTPClient: p.cfg.HTTPClient, UserAgent: "aicr-operator-planner",
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.cfg.RootCAs}}
	ref := p.cfg.SecretNamespace + "/" + p.cfg.SecretName
	if p.cfg.Secrets == nil || p.cfg.SecretName == "" {
		return opts, "anonymously (the planner has no repo-creds Secret configured)", nil
	}
	sec, err := p.cfg.Secrets(ctx, p.cfg.SecretNamespace, p.cfg.SecretName)
	switch {
	case apierrors.IsNotFound(err):
		return opts, fmt.Sprintf("anonymously (the repo-creds Secret %s does not exist)", ref), nil
	case apierrors.IsForbidden(err):
		return opts, "", &plan.Error{Reason: v1alpha1.ReasonUnauthorized, Field: fieldRepository,
			Message: fmt.Sprintf("the planner may not read the repo-creds Secret %s (the chart grants get on it by name)", ref)}
	case err != nil:
		return opts, "", &plan.Error{Reason: v1alpha1.ReasonBundleUnavailable, Field: fieldRepository,
			Message: fmt.Sprintf("read the repo-creds Secret %s: %v", ref, err)}
	}
	prefix := strings.TrimSuffix(strings.TrimPrefix(string(sec.Data[KeyURL]), "oci://"), "/")
	// Plain HTTP is the host's property (insecureOCIForceHttp for the Secret's registry), the
	// credentials the url prefix's: they go to no repository outside it.
	host, _, _ := strings.Cut(prefix, "/")
	opts.PlainHTTP = host == repo.Host && string(sec.Data[KeyInsecureOCIForceHTTP]) == "true"
	// So is not verifying its certificate (insecure, as Argo CD reads it).
	opts.TLS.InsecureSkipVerify = host == repo.Host && string(sec.Data[KeyInsecure]) == "true" //nolint:gosec // G402: the Secret's owner asked for it, as Argo CD honours it
	if prefix == "" || (repo.String() != prefix && !strings.HasPrefix(repo.String(), prefix+"/")) {
		return opts, fmt.Sprintf("anonymously (%s is not under the url oci://%s of the repo-creds Secret %s)", repo, prefix, ref), nil
	}
	// A client certificate is a credential: only for the url prefix's repositories.
	certPEM, keyPEM := sec.Data[KeyTLSClientCertData], sec.Data[KeyTLSClientCertKey]
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The error names no key material; say which keys, not what they hold.
			return opts, "", &plan.Error{Reason: v1alpha1.ReasonUnauthorized, Field: fieldRepository,
				Message: fmt.Sprintf("the repo-creds Secret %s: %s and %s must be a PEM certificate and its PEM private key (both, or neither)", ref, KeyTLSClientCertData, KeyTLSClientCertKey)}
		}
		opts.TLS.Certificates = []tls.Certificate{pair}
	}
	opts.Credentials = ociregistry.Credentials{Username: string(sec.Data[KeyUsername]), Password: string(sec.Data[KeyPassword])}
	if opts.Credentials == (ociregistry.Credentials{}) {
		if len(opts.TLS.Certificates) > 0 {
			return opts, fmt.Sprintf("with the client certificate of the repo-creds Secret %s", ref), nil
		}
		return opts, fmt.Sprintf("anonymously (the repo-creds Secret %s holds no username or password)", ref), nil
	}
	return opts, fmt.Sprintf("with the credentials of the repo-creds Secret %s", ref), nil
}

// explain turns a registry failure into the Resolved reason, the field at fault and the
// registry's answer.
func (p *Puller) explain(key, login string, err error) error {
	var reason, field, advice string
	switch {
	case errors.Is(err, ociregistry.ErrNotFound):
		reason, field = v1alpha1.ReasonBundleNotFound, fieldDigest
		advice = "push the bundle (kubectl aicr bundle push FILE --repository REPO prints its digest) or name a digest the repository has"
	case errors.Is(err, ociregistry.ErrUnauthorized):
		reason, field = v1alpha1.ReasonUnauthorized, fieldRepository
		advice = "pulled " + login + "; grant those credentials pull on the repository, or push the bundle under the Secret's url"
	case errors.Is(err, ociregistry.ErrDigestMismatch):
		reason, field = v1alpha1.ReasonBundleDigestMismatch, fieldDigest
		advice = "the registry served other content than the digest names; check the registry (or a proxy before it)"
	case errors.Is(err, ociregistry.ErrTooLarge):
		reason, field = v1alpha1.ReasonContentTooLarge, fieldSource
		advice = fmt.Sprintf("a bundle document may be at most %d bytes", p.cfg.Limit)
	case errors.Is(err, ociregistry.ErrWrongArtifact):
		reason, field = v1alpha1.ReasonBundleInvalid, fieldDigest
		advice = "name the digest of a bundle pushed with kubectl aicr bundle push"
	default:
		reason, field = v1alpha1.ReasonBundleUnavailable, fieldRepository
		advice = "the registry could not be read; it is tried again"
	}
	return &plan.Error{Reason: reason, Field: field, Message: fmt.Sprintf("pull bundle %s: %v; %s", key, err, advice)}
}

func (p *Puller) cached(key string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.byKey[key]
	if !ok {
		return nil, false
	}
	p.order.MoveToFront(el)
	return el.Value.(*entry).data, true
}

func (p *Puller) add(key string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byKey[key]; ok || int64(len(data)) > p.cfg.CacheBytes {
		return
	}
	p.byKey[key] = p.order.PushFront(&entry{key: key, data: data})
	p.bytes += int64(len(data))
	for p.order.Len() > p.cfg.CacheEntries || p.bytes > p.cfg.CacheBytes {
		last := p.order.Back()
		e := last.Value.(*entry)
		p.order.Remove(last)
		delete(p.byKey, e.key)
		p.bytes -= int64(len(e.data))
	}
}
