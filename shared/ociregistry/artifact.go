package ociregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Media types, artifact types and annotations the operator reads and writes.
const (
	MediaTypeImageManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeImageIndex    = "application/vnd.oci.image.index.v1+json"
	// MediaTypeEmpty is the empty descriptor's type: the blob "{}".
	MediaTypeEmpty = "application/vnd.oci.empty.v1+json"

	// BundleArtifactType marks a bundle artifact: one BundleLayerMediaType layer holding the
	// bundle document (the YAML a ConfigMap bundle holds), the empty config.
	BundleArtifactType   = "application/vnd.aicr-run.bundle.v1"
	BundleLayerMediaType = "application/vnd.aicr-run.bundle.layer.v1+yaml"
	// BundleLayerTitle is the bundle layer's org.opencontainers.image.title.
	BundleLayerTitle = "bundle.yaml"

	// HelmConfigMediaType and HelmChartLayerMediaType are Helm's chart layout in OCI: the chart's
	// metadata (Chart.yaml as JSON) as config, the packaged chart (.tgz) as the one layer.
	HelmConfigMediaType     = "application/vnd.cncf.helm.config.v1+json"
	HelmChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

	AnnotationTitle   = "org.opencontainers.image.title"
	AnnotationVersion = "org.opencontainers.image.version"
)

// emptyJSON is the empty descriptor's content.
var emptyJSON = []byte("{}")

// ErrWrongArtifact means a manifest is not the kind of artifact asked for (another artifactType, no
// or several layers, another layer type).
var ErrWrongArtifact = errors.New("not the expected artifact")

// Descriptor points at content (OCI image spec descriptor).
type Descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Blob is content to push with its media type.
type Blob struct {
	MediaType string
	Data      []byte
}

// Artifact is a manifest and the blobs it points at, ready to push.
type Artifact struct {
	Manifest []byte
	// Blobs are the config and the layers.
	Blobs []Blob
}

// Digest is the manifest's digest: what a pull by digest names.
func (a Artifact) Digest() string { return Digest(a.Manifest) }

// newArtifact serialises m (encoding/json sorts annotation keys, so the same input gives the
// same bytes and digest) with its blobs.
func newArtifact(m Manifest, blobs []Blob) Artifact {
	raw, err := json.Marshal(m)
	if err != nil {
		// a Manifest holds strings, ints and string maps only
		panic(fmt.Sprintf("ociregistry: marshal manifest: %v", err))
	}
	return Artifact{Manifest: raw, Blobs: blobs}
}

func descriptorOf(b Blob, annotations map[string]string) Descriptor {
	return Descriptor{MediaType: b.MediaType, Digest: Digest(b.Data), Size: int64(len(b.Data)), Annotations: annotations}
}

// BundleArtifact is the bundle document doc as the operator's bundle artifact. It is
// reproducible: the same document gives the same manifest digest.
func BundleArtifact(doc []byte) Artifact {
	config := Blob{MediaType: MediaTypeEmpty, Data: emptyJSON}
	layer := Blob{MediaType: BundleLayerMediaType, Data: doc}
	return newArtifact(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeImageManifest,
		ArtifactType:  BundleArtifactType,
		Config:        descriptorOf(config, nil),
		Layers:        []Descriptor{descriptorOf(layer, map[string]string{AnnotationTitle: BundleLayerTitle})},
	}, []Blob{config, layer})
}

// ChartArtifact is a packaged Helm chart (chart: the .tgz) with its metadata (config: Chart.yaml
// as JSON) in Helm's OCI layout; annotations (title, version, ...) go on the manifest. No
// creation time is written, so the same chart gives the same digest.
func ChartArtifact(config, chart []byte, annotations map[string]string) Artifact {
	cfg := Blob{MediaType: HelmConfigMediaType, Data: config}
	layer := Blob{MediaType: HelmChartLayerMediaType, Data: chart}
	return newArtifact(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeImageManifest,
		Config:        descriptorOf(cfg, nil),
		Layers:        []Descriptor{descriptorOf(layer, nil)},
		Annotations:   maps.Clone(annotations),
	}, []Blob{cfg, layer})
}

// PushArtifact pushes a's blobs and then its manifest, under ref.Tag when set (by digest
// otherwise), and returns the manifest's descriptor.
func (c *Client) PushArtifact(ctx context.Context, ref Reference, a Artifact) (Descriptor, error) {
	for _, b := range a.Blobs {
		if _, err := c.PushBlob(ctx, ref.Repository, b.MediaType, b.Data); err != nil {
			return Descriptor{}, err
		}
	}
	return c.PushManifest(ctx, ref.Repository, ref.Tag, MediaTypeImageManifest, a.Manifest)
}

// PullBundle reads the bundle artifact of repo with digest: the manifest (verified against
// digest, at most DefaultMaxManifestBytes), that it is a bundle artifact, and its one layer
// (verified against the layer's digest, at most limit bytes, which must be > 0).
func (c *Client) PullBundle(ctx context.Context, repo Repository, digest string, limit int64) ([]byte, error) {
	raw, _, err := c.FetchManifest(ctx, repo, digest, DefaultMaxManifestBytes)
	if err != nil {
		return nil, err
	}
	ref := repo.String() + "@" + digest
	layer, err := bundleLayer(raw)
	if err != nil {
		return nil, &Error{Op: "pull bundle", Ref: ref, Kind: ErrWrongArtifact, Detail: err.Error()}
	}
	if layer.Size > limit {
		return nil, &Error{Op: "pull bundle", Ref: ref, Kind: ErrTooLarge,
			Detail: fmt.Sprintf("the bundle layer is %d bytes, the limit is %d", layer.Size, limit)}
	}
	return c.FetchBlob(ctx, repo, layer.Digest, limit)
}

// bundleLayer checks raw is a bundle artifact's manifest and returns its layer.
func bundleLayer(raw []byte) (Descriptor, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Descriptor{}, fmt.Errorf("the manifest is not JSON: %v", err)
	}
	if m.SchemaVersion != 2 || (m.MediaType != "" && m.MediaType != MediaTypeImageManifest) {
		return Descriptor{}, fmt.Errorf("mediaType %q schemaVersion %d: an OCI image manifest (%s, schemaVersion 2) is required", m.MediaType, m.SchemaVersion, MediaTypeImageManifest)
	}
	if m.ArtifactType != BundleArtifactType {
		return Descriptor{}, fmt.Errorf("artifactType %q: %s is required (push bundles with kubectl aicr bundle push)", m.ArtifactType, BundleArtifactType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != BundleLayerMediaType {
		types := make([]string, len(m.Layers))
		for i, l := range m.Layers {
			types[i] = l.MediaType
		}
		return Descriptor{}, fmt.Errorf("layers %v: exactly one layer of %s is required", types, BundleLayerMediaType)
	}
	if err := ValidateDigest(m.Layers[0].Digest); err != nil {
		return Descriptor{}, fmt.Errorf("layers[0].digest: %v", err)
	}
	return m.Layers[0], nil
}
