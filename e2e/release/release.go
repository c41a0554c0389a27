package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
)

// ChartDir is the operator's chart, relative to the repository root.
const ChartDir = "deploy/charts/aicr-operator"

// ChecksumsFile is the sha256sum-format list of every file of a release.
const ChecksumsFile = "SHA256SUMS"

// Options configure Release.
type Options struct {
	// Root is the repository root; Out the release's folder (emptied first).
	Root, Out string
	// Version is the release's semantic version, v<major>.<minor>.<patch>[-pre]: the images' tag,
	// the chart's appVersion and (without the v) its version, the plugin's version.
	Version  string
	Revision string
	// Epoch is the time of every timestamp (SOURCE_DATE_EPOCH, the commit's time).
	Epoch time.Time
	// CA is the images' certificates (imagebuild.ReadCADeb).
	CA *imagebuild.CACertificates
	// Registry is host[:port]/prefix: the images go to <Registry>/<binary>:<Version>, the chart
	// to oci://<Registry>/charts/aicr-operator:<chart version>.
	Registry string
	// Helm is the helm binary (hack/tools.sh builds it); HelmEnv its environment (HELM_*_HOME),
	// the process's when nil.
	Helm    string
	HelmEnv []string
	// Images, when set, are the release's images already built (imagebuild.Shared of
	// imagebuild.ReleaseBinaries with this Version, Revision and Epoch); Release builds them when
	// nil.
	Images []imagebuild.Image
	// URLBase is where the plugin archives are downloaded from (the krew manifest's uri); the
	// GitHub release of Version when empty.
	URLBase string
	// Log receives one line per step; io.Discard when nil.
	Log io.Writer
}

// Result is what Release published.
type Result struct {
	Version string
	// Images are the pushed images, by digest, with their sizes.
	Images []Image
	// Chart is the pushed chart.
	Chart Chart
	// Plugin are the plugin's archives.
	Plugin []Archive
	// Wall is how long the release took.
	Wall time.Duration
}

// Image is one pushed image.
type Image struct {
	Name string
	// Reference is <Registry>/<name>:<version>@<digest>.
	Reference string
	Digest    string
	// Sizes are the compressed sizes of each platform's layers, by "os/arch".
	Sizes map[string]int64
}

// Chart is the pushed chart.
type Chart struct {
	// Repo is the repoURL of an Argo CD Application: oci://<Registry>/charts/aicr-operator.
	Repo    string
	Version string
	// Digest is the OCI manifest's digest, an Application's targetRevision.
	Digest string
	// Archive is the packaged chart's file name in Options.Out.
	Archive string
}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// Release builds and publishes one release: every image (imagebuild.ReleaseBinaries) pushed to
// o.Registry; the chart, its values naming those images by digest, packaged and pushed as an OCI
// artifact with helm; the plugin's archives and krew manifest (Plugin); images.txt (each image's
// reference by digest); release-notes.md (CHANGELOG.md's Unreleased section); and SHA256SUMS of
// every file in o.Out.
func Release(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	res := Result{Version: o.Version}
	if !semver.MatchString(o.Version) {
		return res, fmt.Errorf("VERSION=%q: want a semantic version with a v, v<major>.<minor>.<patch>[-<pre-release>] (v0.2.0, v0.2.0-rc.1)", o.Version)
	}
	if o.Registry == "" {
		return res, fmt.Errorf("REGISTRY is required: host[:port]/prefix the images and the chart are pushed to")
	}
	o.Registry = strings.TrimSuffix(o.Registry, "/")
	if _, err := name.NewRepository(o.Registry + "/planner"); err != nil {
		return res, fmt.Errorf("REGISTRY=%q: want host[:port]/prefix: %w", o.Registry, err)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.URLBase == "" {
		o.URLBase = imagebuild.DefaultSource + "/releases/download/" + o.Version
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return res, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return res, err
	}
	work, err := os.MkdirTemp("", "aicr-release-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)

	// The images, pushed; their digests go into the chart.
	step := time.Now()
	built := o.Images
	if built == nil {
		if built, err = imagebuild.Build(ctx, imagebuild.Options{Root: o.Root, Out: filepath.Join(work, "oci"), Version: o.Version,
			Revision: o.Revision, Epoch: o.Epoch, CA: o.CA, Binaries: imagebuild.ReleaseBinaries(), Log: o.Log}); err != nil {
			return res, err
		}
	} else if err := sameImages(built); err != nil {
		return res, err
	}
	pushed, err := imagebuild.Push(ctx, built, o.Registry, o.Version)
	if err != nil {
		return res, err
	}
	var images strings.Builder
	for i, p := range pushed {
		res.Images = append(res.Images, Image{Name: p.Name, Reference: p.Reference, Digest: p.Digest.String(), Sizes: built[i].Sizes})
		fmt.Fprintf(&images, "%s %s\n", p.Name, p.Reference)
	}
	if err := os.WriteFile(filepath.Join(o.Out, "images.txt"), []byte(images.String()), 0o644); err != nil {
		return res, err
	}
	fmt.Fprintf(o.Log, "release: %d images pushed to %s in %s\n", len(pushed), o.Registry, time.Since(step).Round(100*time.Millisecond))

	// The chart, naming them by digest.
	step = time.Now()
	if res.Chart, err = o.chart(ctx, work, res.Images); err != nil {
		return res, err
	}
	fmt.Fprintf(o.Log, "release: chart %s@%s in %s\n", res.Chart.Repo, res.Chart.Digest, time.Since(step).Round(100*time.Millisecond))

	// The plugin.
	step = time.Now()
	if res.Plugin, err = Plugin(ctx, PluginOptions{Root: o.Root, Out: o.Out, Version: o.Version, Revision: o.Revision, Epoch: o.Epoch, URLBase: o.URLBase}); err != nil {
		return res, err
	}
	fmt.Fprintf(o.Log, "release: plugin for %d platforms in %s\n", len(res.Plugin), time.Since(step).Round(100*time.Millisecond))

	if err := releaseNotes(o.Root, o.Out); err != nil {
		return res, err
	}
	if err := WriteChecksums(o.Out); err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	return res, nil
}

// sameImages requires prebuilt images to be one per release binary, in order.
func sameImages(images []imagebuild.Image) error {
	want := imagebuild.ReleaseBinaries()
	if len(images) != len(want) {
		return fmt.Errorf("release: %d prebuilt images, want one per release binary (%d)", len(images), len(want))
	}
	for i, b := range want {
		if images[i].Name != b.Name {
			return fmt.Errorf("release: prebuilt image %d is %s, want %s", i, images[i].Name, b.Name)
		}
	}
	return nil
}

// chart copies the chart, sets its version and its images' digests, packages it into o.Out and
// pushes it.
func (o Options) chart(ctx context.Context, work string, images []Image) (Chart, error) {
	dir := filepath.Join(work, "chart", filepath.Base(ChartDir))
	if err := PrepareChart(o.Root, dir, o.Registry, o.Version, o.Epoch, images); err != nil {
		return Chart{}, err
	}
	version := strings.TrimPrefix(o.Version, "v")
	if _, err := o.helm(ctx, "lint", "--strict", dir, "--set", "registry.repository="+o.Registry); err != nil {
		return Chart{}, err
	}
	if _, err := o.helm(ctx, "package", dir, "--destination", o.Out); err != nil {
		return Chart{}, err
	}
	c := Chart{Repo: "oci://" + o.Registry + "/charts/aicr-operator", Version: version, Archive: "aicr-operator-" + version + ".tgz"}
	args := []string{"push", filepath.Join(o.Out, c.Archive), "oci://" + o.Registry + "/charts"}
	if reg, err := name.NewRegistry(strings.SplitN(o.Registry, "/", 2)[0]); err == nil && reg.Scheme() == "http" {
		// What go-containerregistry does for the images: plain HTTP for localhost and private
		// addresses.
		args = append(args, "--plain-http")
	}
	out, err := o.helm(ctx, args...)
	if err != nil {
		return Chart{}, err
	}
	m := pushDigest.FindSubmatch(out)
	if m == nil {
		return Chart{}, fmt.Errorf("helm push %s: no digest in its output: %s", c.Archive, out)
	}
	c.Digest = string(m[1])
	return c, nil
}

// PrepareChart copies the repository's chart to dir and makes it the release's: its version
// (without the v) and appVersion, image.registry, image.digests of every image but NATS, and
// nats.image naming the release's nats-server by digest. Every file gets the epoch's time, so
// helm package writes the same archive for the same commit.
func PrepareChart(root, dir, registry, version string, epoch time.Time, images []Image) error {
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, ChartDir))); err != nil {
		return fmt.Errorf("copy the chart: %w", err)
	}
	if err := setChartVersion(filepath.Join(dir, "Chart.yaml"), version); err != nil {
		return err
	}
	var digests, nats strings.Builder
	digests.WriteString("  digests:\n")
	for _, img := range images {
		if img.Name == imagebuild.NATS.Name {
			fmt.Fprintf(&nats, "    repository: %s/%s\n    tag: %s\n", registry, imagebuild.NATS.Name, version)
			fmt.Fprintf(&nats, "    # -- sha256:<64 hex>: the image is <repository>@<digest>, the tag unused. This release's\n")
			fmt.Fprintf(&nats, "    # nats-server image, built and pushed beside the operator's.\n    digest: %s\n", img.Digest)
			continue
		}
		fmt.Fprintf(&digests, "    %s: %s\n", img.Name, img.Digest)
	}
	if nats.Len() == 0 {
		return fmt.Errorf("no %s image among the release's", imagebuild.NATS.Name)
	}
	if err := edit(filepath.Join(dir, "values.yaml"), map[string]string{
		"  registry: ghcr.io/aicr-run/aicr-operator\n": "  registry: " + registry + "\n",
		"  digests: {}\n": digests.String(),
		"    repository: nats\n    tag: 2.15.2-alpine\n" +
			"    # -- sha256:<64 hex>: the image is <repository>@<digest>, the tag unused. A release's chart\n" +
			"    # names the nats-server image it built and pushed beside the operator's, by digest.\n" +
			"    digest: \"\"\n": nats.String(),
	}); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, epoch, epoch)
	})
}

// pushDigest is how helm push reports the manifest digest.
var pushDigest = regexp.MustCompile(`(?m)^Digest:\s+(sha256:[0-9a-f]{64})\s*$`)

func (o Options) helm(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, o.Helm, args...)
	if o.HelmEnv != nil {
		cmd.Env = o.HelmEnv
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// setChartVersion sets Chart.yaml's version (without the v) and appVersion.
func setChartVersion(path, version string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	set := 0
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "version:"):
			lines[i], set = "version: "+strings.TrimPrefix(version, "v"), set+1
		case strings.HasPrefix(l, "appVersion:"):
			lines[i], set = fmt.Sprintf("appVersion: %q", version), set+1
		}
	}
	if set != 2 {
		return fmt.Errorf("%s: want one version and one appVersion line, found %d of them", path, set)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// edit replaces each key of repl, which must occur exactly once in the file, with its value.
func edit(path string, repl map[string]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	for old, repl := range repl {
		if n := strings.Count(s, old); n != 1 {
			return fmt.Errorf("%s: %q occurs %d times, want once (the release fills it in)", path, strings.TrimSpace(old), n)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// releaseNotes writes CHANGELOG.md's Unreleased section into release-notes.md.
func releaseNotes(root, out string) error {
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	_, after, ok := strings.Cut(string(data), "## [Unreleased]\n")
	if !ok {
		return fmt.Errorf("CHANGELOG.md has no \"## [Unreleased]\" section")
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i+1]
	}
	return os.WriteFile(filepath.Join(out, "release-notes.md"), []byte(strings.TrimSpace(after)+"\n"), 0o644)
}

// WriteChecksums writes SHA256SUMS, the sha256sum -c format, of every other file under dir, in
// the lexical order of their paths.
func WriteChecksums(dir string) error {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == ChecksumsFile {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
