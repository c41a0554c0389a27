package imagebuild

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Binary is one image: the binary's name (the image's name) and its Go package, relative to the
// repository root.
type Binary struct{ Name, Package string }

// Binaries are the images make images builds: the five services, the chart's setup Job and the
// plugin (for the chart's test hook).
var Binaries = []Binary{
	{"planner", "./planner"}, {"applier", "./applier"}, {"readiness", "./readiness"},
	{"credrefresher", "./credrefresher"}, {"admission", "./admission"}, {"setup", "./setup"},
	{"kubectl-aicr", "./cli/cmd/kubectl-aicr"},
}

// NATS is the image of the chart's NATS servers a release builds beside the operator's: the
// nats-server the modules require (go.work), on the same static base, so that every image the
// released chart names is in the release's registry.
var NATS = Binary{Name: "nats-server", Package: "github.com/nats-io/nats-server/v2"}

// ReleaseBinaries are the images a release publishes: Binaries and NATS.
func ReleaseBinaries() []Binary { return append(slices.Clone(Binaries), NATS) }

// Platforms are the platforms of every image.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// The OCI annotation keys the images carry (as labels of the image config and annotations of
// the manifests and the index).
const (
	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationLicenses = "org.opencontainers.image.licenses"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
	// DefaultSource is the repository the images say they come from.
	DefaultSource = "https://github.com/aicr-run/aicr-operator"
	// BuildInfoPackage is where -ldflags -X stamps the version and revision.
	BuildInfoPackage = "github.com/aicr-run/aicr-operator/servicekit/buildinfo"
)

// Options configure Build.
type Options struct {
	// Root is the repository root (where go.work is).
	Root string
	// Out is the OCI image layout folder; it is emptied first.
	Out string
	// Version and Revision are stamped into the binaries and the labels.
	Version, Revision string
	// Epoch is the time of every timestamp (SOURCE_DATE_EPOCH, the commit's time).
	Epoch time.Time
	// Source is org.opencontainers.image.source (DefaultSource when empty).
	Source string
	// CA is the base's certificates (ReadCADeb).
	CA *CACertificates
	// Binaries and Platforms to build (the package's lists when empty).
	Binaries  []Binary
	Platforms []v1.Platform
	// Log receives one line per step; io.Discard when nil.
	Log io.Writer
}

// Image is one built multi-platform image.
type Image struct {
	Name string
	// Digest is the index's digest.
	Digest v1.Hash
	// Index is the multi-platform index.
	Index v1.ImageIndex
	// Sizes are the compressed sizes of each platform's layers, by "os/arch".
	Sizes map[string]int64
}

func (o *Options) defaults() error {
	if o.Root == "" || o.Out == "" || o.Version == "" || o.Revision == "" || o.Epoch.IsZero() || o.CA == nil {
		return fmt.Errorf("imagebuild: Root, Out, Version, Revision, Epoch and CA are required")
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if len(o.Binaries) == 0 {
		o.Binaries = Binaries
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return nil
}

// Build compiles the binaries for each platform, assembles the images and writes them to the
// OCI layout o.Out, one index per binary named by its ref.name annotation.
func Build(ctx context.Context, o Options) ([]Image, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "aicr-imagebuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	for _, p := range o.Platforms {
		start := time.Now()
		if err := compile(ctx, o, p, filepath.Join(work, p.OS+"-"+p.Architecture)); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Log, "images: compiled %d binaries for %s in %s\n", len(o.Binaries), p.OS+"/"+p.Architecture, time.Since(start).Round(100*time.Millisecond))
	}
	base, err := newLayer(baseFiles(o.CA), o.Epoch)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	lp, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("write OCI layout %s: %w", o.Out, err)
	}
	var images []Image
	for _, b := range o.Binaries {
		img, err := o.assemble(b, base, work)
		if err != nil {
			return nil, err
		}
		if err := lp.AppendIndex(img.Index, layout.WithAnnotations(map[string]string{AnnotationRefName: b.Name})); err != nil {
			return nil, fmt.Errorf("write %s to %s: %w", b.Name, o.Out, err)
		}
		images = append(images, img)
	}
	return images, nil
}

// compile builds every binary for one platform into dir, static (CGO_ENABLED=0), -trimpath, the
// version and revision stamped in.
func compile(ctx context.Context, o Options, p v1.Platform, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", BuildInfoPackage, o.Version, BuildInfoPackage, o.Revision)
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", dir + string(filepath.Separator)}
	for _, b := range o.Binaries {
		args = append(args, b.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w\n%s", p.OS, p.Architecture, err, out)
	}
	return nil
}

func (o Options) annotations(b Binary) map[string]string {
	return map[string]string{
		AnnotationTitle:    "aicr-operator " + b.Name,
		AnnotationSource:   o.Source,
		AnnotationRevision: o.Revision,
		AnnotationVersion:  o.Version,
		AnnotationLicenses: "Apache-2.0",
		AnnotationCreated:  o.Epoch.UTC().Format(time.RFC3339),
	}
}

// assemble makes one binary's index: per platform, the base and a layer with the binary, the
// licence and the SBOM.
func (o Options) assemble(b Binary, base v1.Layer, work string) (Image, error) {
	anns := o.annotations(b)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	res := Image{Name: b.Name, Sizes: map[string]int64{}}
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return res, err
	}
	for _, p := range o.Platforms {
		plat := p.OS + "/" + p.Architecture
		binPath := filepath.Join(work, p.OS+"-"+p.Architecture, b.Name)
		bin, err := os.ReadFile(binPath)
		if err != nil {
			return res, fmt.Errorf("%s for %s: %w", b.Name, plat, err)
		}
		bi, err := buildinfo.ReadFile(binPath)
		if err != nil {
			return res, fmt.Errorf("%s for %s: no Go build information: %w", b.Name, plat, err)
		}
		sum := sha256.Sum256(bin)
		sbom, err := SBOM(sbomInput{Binary: b.Name, Version: o.Version, Revision: o.Revision, Source: o.Source, Platform: plat,
			Created: o.Epoch, BinarySHA256: hex.EncodeToString(sum[:]), Build: bi, CA: o.CA})
		if err != nil {
			return res, err
		}
		docDir := strings.TrimPrefix(SBOMDir, "/")
		app, err := newLayer([]file{
			{Path: strings.TrimPrefix(BinDir, "/") + "/" + b.Name, Mode: 0o755, Data: bin},
			{Path: docDir + "/LICENSE", Mode: 0o644, Data: license},
			{Path: docDir + "/" + b.Name + ".spdx.json", Mode: 0o644, Data: sbom},
		}, o.Epoch)
		if err != nil {
			return res, err
		}
		img, err := o.image(b, p, base, app, anns)
		if err != nil {
			return res, fmt.Errorf("%s for %s: %w", b.Name, plat, err)
		}
		for _, l := range []v1.Layer{base, app} {
			n, err := l.Size()
			if err != nil {
				return res, err
			}
			res.Sizes[plat] += n
		}
		pc := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &pc}})
	}
	res.Index = mutate.Annotations(idx, anns).(v1.ImageIndex)
	if res.Digest, err = res.Index.Digest(); err != nil {
		return res, err
	}
	return res, nil
}

func (o Options) image(b Binary, p v1.Platform, base, app v1.Layer, anns map[string]string) (v1.Image, error) {
	created := v1.Time{Time: o.Epoch.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: p.Architecture, OS: p.OS, Created: created,
		Config: v1.Config{
			User:       ImageUser,
			Entrypoint: []string{BinDir + "/" + b.Name},
			Env:        []string{"PATH=" + BinDir + ":/usr/bin:/bin", "SSL_CERT_FILE=" + CABundle},
			WorkingDir: "/home/" + UserName,
			Labels:     anns,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), cfg)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: fmt.Sprintf("aicr-operator imagebuild: static base (ca-certificates %s, user %s %d)", o.CA.Version, UserName, UID), Comment: "base"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: fmt.Sprintf("aicr-operator imagebuild: %s %s (%s), its LICENSE and SPDX SBOM", b.Name, o.Version, o.Revision)}},
	)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, anns).(v1.Image), nil
}
