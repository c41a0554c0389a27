package ociregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const bundleDoc = "apiVersion: bundle.aicr.run/v1alpha1\nkind: Bundle\nmetadata: {name: s, version: \"1\"}\n"

// push puts the bundle artifact of doc under name:tag and returns its descriptor.
func push(t *testing.T, c *Client, host, name, tag, doc string) Descriptor {
	t.Helper()
	desc, err := c.PushArtifact(context.Background(), Reference{Repository: Repository{Host: host, Name: name}, Tag: tag}, BundleArtifact([]byte(doc)))
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return desc
}

func TestPushResolvePull(t *testing.T) {
	for _, auth := range []string{"", "basic", "bearer"} {
		t.Run("auth="+auth, func(t *testing.T) {
			f := newFakeRegistry(t, auth, "AWS", "ecr-token")
			c := f.client(Credentials{Username: "AWS", Password: "ecr-token"})
			ctx := context.Background()
			desc := push(t, c, f.host(), "aicr/bundles", "v1", bundleDoc)
			if want := BundleArtifact([]byte(bundleDoc)).Digest(); desc.Digest != want {
				t.Fatalf("pushed digest %s, want the artifact's %s", desc.Digest, want)
			}
			repo := Repository{Host: f.host(), Name: "aicr/bundles"}
			got, err := c.Resolve(ctx, Reference{Repository: repo, Tag: "v1"})
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if got.Digest != desc.Digest || got.MediaType != MediaTypeImageManifest {
				t.Fatalf("resolve = %+v, want digest %s of type %s", got, desc.Digest, MediaTypeImageManifest)
			}
			// a fresh client (no cached authorization) pulls it by digest
			doc, err := f.client(Credentials{Username: "AWS", Password: "ecr-token"}).PullBundle(ctx, repo, desc.Digest, 1<<20)
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			if string(doc) != bundleDoc {
				t.Fatalf("pulled %q, want %q", doc, bundleDoc)
			}
			var m Manifest
			raw, mt, err := c.FetchManifest(ctx, repo, desc.Digest, 0)
			if err != nil || json.Unmarshal(raw, &m) != nil {
				t.Fatalf("fetch manifest: %v", err)
			}
			if mt != MediaTypeImageManifest || m.ArtifactType != BundleArtifactType || m.Config.Digest != Digest([]byte("{}")) ||
				m.Layers[0].Annotations[AnnotationTitle] != "bundle.yaml" {
				t.Fatalf("manifest %s (%s) is not the bundle artifact", raw, mt)
			}
		})
	}
}

func TestBearerFlow(t *testing.T) {
	f := newFakeRegistry(t, "bearer", "robot", "s3cret")
	c := f.client(Credentials{Username: "robot", Password: "s3cret"})
	desc := push(t, c, f.host(), "team/bundles", "v1", bundleDoc)
	if f.lastService != "fake.test" || len(f.lastScopes) != 1 || f.lastScopes[0] != "repository:team/bundles:pull,push" {
		t.Fatalf("token asked with service %q scopes %q, want the challenge's", f.lastService, f.lastScopes)
	}
	hits := f.tokenHits
	// the second push reuses the tokens it holds (pull and push scope): no new token request
	push(t, c, f.host(), "team/bundles", "v2", bundleDoc+"# 2\n")
	if f.tokenHits != hits {
		t.Fatalf("token endpoint asked %d more times for a second push, want 0 (tokens are cached)", f.tokenHits-hits)
	}
	// wrong password: the token endpoint refuses, the error says unauthorized and not the password
	_, err := f.client(Credentials{Username: "robot", Password: "wrong-pass"}).PullBundle(context.Background(),
		Repository{Host: f.host(), Name: "team/bundles"}, desc.Digest, 1<<20)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("pull with a wrong password: %v, want ErrUnauthorized", err)
	}
	if strings.Contains(err.Error(), "wrong-pass") || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("error %q: want the refusal, never the password", err)
	}
}

func TestAuthErrors(t *testing.T) {
	tests := map[string]struct {
		auth       string
		creds      Credentials
		wantDetail string
	}{
		"basic, no credentials":     {auth: "basic", wantDetail: "needs credentials and none were given"},
		"basic, wrong password":     {auth: "basic", creds: Credentials{Username: "u", Password: "hunter2"}, wantDetail: "401"},
		"bearer, no credentials":    {auth: "bearer", wantDetail: "refused the credentials"},
		"bearer, wrong credentials": {auth: "bearer", creds: Credentials{Username: "u", Password: "hunter2"}, wantDetail: "refused the credentials"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeRegistry(t, tc.auth, "u", "right")
			desc := push(t, f.client(Credentials{Username: "u", Password: "right"}), f.host(), "b", "v1", bundleDoc)
			_, err := f.client(tc.creds).PullBundle(context.Background(), Repository{Host: f.host(), Name: "b"}, desc.Digest, 1<<20)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("err = %v, want ErrUnauthorized", err)
			}
			if !strings.Contains(err.Error(), tc.wantDetail) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("err %q: want %q in it and no password", err, tc.wantDetail)
			}
		})
	}
}

func TestPullErrors(t *testing.T) {
	other := Digest([]byte("other"))
	tests := map[string]struct {
		setup   func(f *fakeRegistry)
		digest  func(pushed Descriptor) string
		limit   int64
		wantErr error
		wantMsg string
	}{
		"manifest not found": {
			digest: func(Descriptor) string { return other }, limit: 1 << 20,
			wantErr: ErrNotFound, wantMsg: "MANIFEST_UNKNOWN",
		},
		"tampered content": {
			setup:   func(f *fakeRegistry) { f.tamper = func(b []byte) []byte { return append(bytes.Clone(b), ' ') } },
			limit:   1 << 20,
			wantErr: ErrDigestMismatch, wantMsg: "the content's digest is sha256:",
		},
		"layer over the limit (declared)": {
			limit: int64(len(bundleDoc)) - 1, wantErr: ErrTooLarge, wantMsg: "the limit is",
		},
		"layer over the limit (chunked answer)": {
			setup: func(f *fakeRegistry) { f.chunked = true },
			limit: int64(len(bundleDoc)) - 1, wantErr: ErrTooLarge,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeRegistry(t, "", "", "")
			c := f.client(Credentials{})
			desc := push(t, c, f.host(), "b", "v1", bundleDoc)
			if tc.setup != nil {
				tc.setup(f)
			}
			d := desc.Digest
			if tc.digest != nil {
				d = tc.digest(desc)
			}
			_, err := c.PullBundle(context.Background(), Repository{Host: f.host(), Name: "b"}, d, tc.limit)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.wantMsg)
			}
		})
	}
}

func TestFetchBlobLimitWithoutDeclaredSize(t *testing.T) {
	f := newFakeRegistry(t, "", "", "")
	f.chunked = true
	c := f.client(Credentials{})
	repo := Repository{Host: f.host(), Name: "b"}
	big := bytes.Repeat([]byte("x"), 4096)
	desc, err := c.PushBlob(context.Background(), repo, "application/octet-stream", big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchBlob(context.Background(), repo, desc.Digest, 4095); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("fetch 4096 bytes with limit 4095: %v, want ErrTooLarge", err)
	}
	got, err := c.FetchBlob(context.Background(), repo, desc.Digest, 4096)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("fetch at the limit: %v", err)
	}
	if _, err := c.FetchBlob(context.Background(), repo, desc.Digest, 0); err == nil {
		t.Fatal("fetch with no limit: want an error")
	}
}

func TestPullBundleRefusesOtherArtifacts(t *testing.T) {
	f := newFakeRegistry(t, "", "", "")
	c := f.client(Credentials{})
	ref := Reference{Repository: Repository{Host: f.host(), Name: "charts/gpu-operator"}, Tag: "1.0.0"}
	desc, err := c.PushArtifact(context.Background(), ref, ChartArtifact([]byte(`{"name":"gpu-operator","version":"1.0.0"}`), []byte("tgz"),
		map[string]string{AnnotationTitle: "gpu-operator", AnnotationVersion: "1.0.0"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PullBundle(context.Background(), ref.Repository, desc.Digest, 1<<20)
	if !errors.Is(err, ErrWrongArtifact) || !strings.Contains(err.Error(), BundleArtifactType) {
		t.Fatalf("pull a chart as a bundle: %v, want ErrWrongArtifact naming %s", err, BundleArtifactType)
	}
}

func TestResolveWithoutDigestHeader(t *testing.T) {
	f := newFakeRegistry(t, "", "", "")
	f.noDigestHeader = true
	c := f.client(Credentials{})
	desc := push(t, c, f.host(), "b", "v1", bundleDoc)
	got, err := c.Resolve(context.Background(), Reference{Repository: Repository{Host: f.host(), Name: "b"}, Tag: "v1"})
	if err != nil || got.Digest != desc.Digest {
		t.Fatalf("resolve = %+v, %v; want %s (hashed from the manifest)", got, err, desc.Digest)
	}
	if _, err := c.Resolve(context.Background(), Reference{Repository: Repository{Host: f.host(), Name: "b"}, Tag: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resolve an unknown tag: %v, want ErrNotFound", err)
	}
}

func TestPushManifestDigestMismatch(t *testing.T) {
	f := newFakeRegistry(t, "", "", "")
	c := f.client(Credentials{})
	repo := Repository{Host: f.host(), Name: "b"}
	// a registry that stores something else (here: reports another digest) is caught on push
	f.reportDigest = Digest([]byte("x"))
	if _, err := c.PushManifest(context.Background(), repo, "v1", MediaTypeImageManifest, []byte(`{}`)); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("push manifest with another digest reported: %v, want ErrDigestMismatch", err)
	}
}

func TestArtifactsAreReproducible(t *testing.T) {
	a, b := BundleArtifact([]byte(bundleDoc)), BundleArtifact([]byte(bundleDoc))
	if !bytes.Equal(a.Manifest, b.Manifest) {
		t.Fatalf("the same document gives two manifests:\n%s\n%s", a.Manifest, b.Manifest)
	}
	if a.Digest() == BundleArtifact([]byte(bundleDoc+"#\n")).Digest() {
		t.Fatal("two documents give one digest")
	}
	// the empty descriptor's digest is the image spec's
	if got := a.Blobs[0]; got.MediaType != MediaTypeEmpty || Digest(got.Data) != "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("config blob %+v is not the empty descriptor", got)
	}
	ann := map[string]string{AnnotationTitle: "c", AnnotationVersion: "1"}
	c1 := ChartArtifact([]byte("{}"), []byte("t"), ann)
	ann[AnnotationTitle] = "changed after"
	if !bytes.Equal(c1.Manifest, ChartArtifact([]byte("{}"), []byte("t"), map[string]string{AnnotationTitle: "c", AnnotationVersion: "1"}).Manifest) {
		t.Fatal("a chart artifact depends on the caller's map after it was built")
	}
}

func TestParseReference(t *testing.T) {
	d := Digest([]byte("x"))
	tests := map[string]struct {
		in      string
		want    Reference
		wantErr string
	}{
		"host and name":          {in: "registry.example.com/aicr/bundles", want: Reference{Repository: Repository{Host: "registry.example.com", Name: "aicr/bundles"}}},
		"port and tag":           {in: "127.0.0.1:5000/b:v1.2", want: Reference{Repository: Repository{Host: "127.0.0.1:5000", Name: "b"}, Tag: "v1.2"}},
		"oci prefix and digest":  {in: "oci://r.io/b@" + d, want: Reference{Repository: Repository{Host: "r.io", Name: "b"}, Digest: d}},
		"tag and digest":         {in: "r.io/b:t@" + d, want: Reference{Repository: Repository{Host: "r.io", Name: "b"}, Tag: "t", Digest: d}},
		"no name":                {in: "r.io", wantErr: "host[:port]/name is required"},
		"uppercase name":         {in: "r.io/Bundles", wantErr: "is not a repository name"},
		"bad tag":                {in: "r.io/b:-x", wantErr: "is not a tag"},
		"short digest":           {in: "r.io/b@sha256:abc", wantErr: "64 lowercase hex"},
		"bad host":               {in: "r_x.io/b", wantErr: "is not a registry host"},
		"ipv6 host with port ok": {in: "[::1]:5000/b", want: Reference{Repository: Repository{Host: "[::1]:5000", Name: "b"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseReference(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseReference(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseChallenge(t *testing.T) {
	scheme, p := parseChallenge(`Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"`)
	if scheme != "Bearer" || p["realm"] != "https://auth.example.com/token" || p["service"] != "registry.example.com" || p["scope"] != "repository:a/b:pull,push" {
		t.Fatalf("parsed %q %v", scheme, p)
	}
	scheme, p = parseChallenge(`Basic realm=fake`)
	if scheme != "Basic" || p["realm"] != "fake" {
		t.Fatalf("parsed %q %v", scheme, p)
	}
}
