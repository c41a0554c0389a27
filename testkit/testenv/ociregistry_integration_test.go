//go:build integration

package testenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// shared/ociregistry against the distribution registry behind htpasswd: a chart helm pushed is read as Helm's
// layout (resolve by tag to helm's digest, manifest and layers verified), the same config and
// chart pushed as ChartArtifact resolve and pull back, and a wrong password is ErrUnauthorized.
func TestOCIRegistryClientOnARealRegistry(t *testing.T) {
	auth := &testenv.BasicAuth{Username: "AWS", Password: "ociregistry-integration-token"}
	env := testenv.StartT(t, testenv.Options{Registry: true, RegistryAuth: auth, SkipArgoCRDs: true})
	ctx := context.Background()
	chart, err := env.PushChart(ctx, filepath.Join("..", "..", "examples", "charts", "charts", "cert-manager"), "aicr/charts")
	if err != nil {
		t.Fatal(err)
	}
	c := ociregistry.New(ociregistry.Options{PlainHTTP: true, Credentials: ociregistry.Credentials{Username: auth.Username, Password: auth.Password}})
	ref, err := ociregistry.ParseReference(chart.Repo + ":" + chart.Version)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := c.Resolve(ctx, ref)
	if err != nil || desc.Digest != chart.Digest {
		t.Fatalf("resolve %s = %+v, %v; want helm's digest %s", ref, desc, err, chart.Digest)
	}
	raw, mt, err := c.FetchManifest(ctx, ref.Repository, chart.Digest, 0)
	if err != nil {
		t.Fatal(err)
	}
	var m ociregistry.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if mt != ociregistry.MediaTypeImageManifest || m.Config.MediaType != ociregistry.HelmConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != ociregistry.HelmChartLayerMediaType {
		t.Fatalf("helm's manifest (%s) is not the layout ChartArtifact writes: %s", mt, raw)
	}
	config, err := c.FetchBlob(ctx, ref.Repository, m.Config.Digest, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := c.FetchBlob(ctx, ref.Repository, m.Layers[0].Digest, 16<<20)
	if err != nil {
		t.Fatal(err)
	}

	// The same chart as ChartArtifact writes it, under another repository.
	a := ociregistry.ChartArtifact(config, tgz, map[string]string{ociregistry.AnnotationTitle: chart.Name, ociregistry.AnnotationVersion: chart.Version})
	mirror := ociregistry.Reference{Repository: ociregistry.Repository{Host: ref.Host, Name: "aicr/mirror/" + chart.Name}, Tag: chart.Version}
	pushed, err := c.PushArtifact(ctx, mirror, a)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.Digest != a.Digest() {
		t.Fatalf("pushed %s, the artifact is %s", pushed.Digest, a.Digest())
	}
	if got, err := c.Resolve(ctx, mirror); err != nil || got.Digest != a.Digest() {
		t.Fatalf("resolve the mirrored chart = %+v, %v; want %s", got, err, a.Digest())
	}
	back, err := c.FetchBlob(ctx, mirror.Repository, m.Layers[0].Digest, 16<<20)
	if err != nil || string(back) != string(tgz) {
		t.Fatalf("pull the mirrored chart layer: %v", err)
	}

	wrong := ociregistry.New(ociregistry.Options{PlainHTTP: true, Credentials: ociregistry.Credentials{Username: auth.Username, Password: "not-the-token"}})
	if _, err := wrong.Resolve(ctx, mirror); !errors.Is(err, ociregistry.ErrUnauthorized) {
		t.Fatalf("resolve with a wrong password: %v, want ErrUnauthorized", err)
	}
	if _, _, err := ociregistry.New(ociregistry.Options{PlainHTTP: true}).FetchManifest(ctx, mirror.Repository, a.Digest(), 0); !errors.Is(err, ociregistry.ErrUnauthorized) {
		t.Fatalf("anonymous pull: %v, want ErrUnauthorized", err)
	}
	if _, _, err := c.FetchManifest(ctx, mirror.Repository, ociregistry.Digest([]byte("absent")), 0); !errors.Is(err, ociregistry.ErrNotFound) {
		t.Fatalf("pull an absent manifest: %v, want ErrNotFound", err)
	}
}
