package imagebuild

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Read returns the images of an OCI layout Build wrote, in its order.
func Read(dir string) ([]Image, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s (run make images): %w", dir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, d := range im.Manifests {
		n := d.Annotations[AnnotationRefName]
		if n == "" {
			continue
		}
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", n, dir, err)
		}
		sizes, err := layerSizes(idx)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", n, dir, err)
		}
		out = append(out, Image{Name: n, Digest: d.Digest, Index: idx, Sizes: sizes})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the OCI layout %s names no image", dir)
	}
	return out, nil
}

// layerSizes are the compressed sizes of each platform's layers in idx, by "os/arch", as Build
// reports them.
func layerSizes(idx v1.ImageIndex) (map[string]int64, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		for _, l := range m.Layers {
			sizes[d.Platform.OS+"/"+d.Platform.Architecture] += l.Size
		}
	}
	return sizes, nil
}

// PlatformImage is the image of idx for platform p.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s", p.OS, p.Architecture)
}

// Pushed is one image pushed.
type Pushed struct {
	Name string
	// Reference is repository:tag@digest.
	Reference string
	Digest    v1.Hash
}

// Push writes each image to <repository>/<name>:<tag> (with the credentials of Docker's config
// and its credential helpers, as crane and helm use them; plain HTTP for localhost and private
// addresses), and returns the references by digest.
func Push(ctx context.Context, images []Image, repository, tag string) ([]Pushed, error) {
	var out []Pushed
	for _, img := range images {
		ref, err := name.NewTag(repository + "/" + img.Name + ":" + tag)
		if err != nil {
			return nil, fmt.Errorf("image reference for %s (REGISTRY=%q, tag %q): %w", img.Name, repository, tag, err)
		}
		if err := remote.WriteIndex(ref, img.Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return nil, fmt.Errorf("push %s: %w", ref, err)
		}
		out = append(out, Pushed{Name: img.Name, Reference: ref.String() + "@" + img.Digest.String(), Digest: img.Digest})
	}
	return out, nil
}

// DockerArchive writes, for docker load, each image's platform p as <repository>/<name>:<tag>
// in the archive format docker save writes (which every Docker engine loads; an OCI layout
// needs Docker 25 or later).
func DockerArchive(w io.Writer, images []Image, repository, tag string, p v1.Platform) error {
	refs := map[name.Tag]v1.Image{}
	for _, img := range images {
		ref, err := name.NewTag(repository + "/" + img.Name + ":" + tag)
		if err != nil {
			return fmt.Errorf("image reference for %s: %w", img.Name, err)
		}
		pi, err := PlatformImage(img.Index, p)
		if err != nil {
			return fmt.Errorf("%s: %w", img.Name, err)
		}
		refs[ref] = pi
	}
	return tarball.MultiWrite(refs, w)
}
