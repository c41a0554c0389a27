// Command aicr-images builds the operator's images without a container engine (make images),
// pushes them (make images REGISTRY=host:port/prefix), loads them into Docker (make
// images-load), publishes a release (make release) and builds the plugin's archives (make
// plugin). See e2e/imagebuild and e2e/release.
//
//	aicr-images build --out build/images/oci --version v0.2.0 [--push host:port/prefix]
//	aicr-images load --out build/images/oci --repository aicr-operator --tag dev
//	aicr-images release --out dist/v0.2.0 --version v0.2.0 --registry host:port/prefix --helm bin/helm
//	aicr-images plugin --out dist/plugin --version v0.2.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
	"github.com/aicr-run/aicr-operator/e2e/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "aicr-images: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: aicr-images build|load|release|plugin [flags]")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, stderr)
	case "load":
		return load(ctx, args[1:], stdout)
	case "release":
		return releaseCmd(ctx, args[1:], stdout, stderr)
	case "plugin":
		return pluginCmd(ctx, args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q: want build, load, release or plugin", args[0])
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	out := fs.String("out", "build/images/oci", "the OCI image layout folder to write (emptied first)")
	version := fs.String("version", "", "the version stamped into the binaries and labels, and the tag pushed (required)")
	revision := fs.String("revision", "", "the git revision (default: git rev-parse HEAD)")
	push := fs.String("push", "", "push each image to <this>/<binary>:<version> and print its digest (host:port/prefix)")
	caDeb := fs.String("ca-deb", "", "Debian's ca-certificates .deb (default: the one in the cache folder, fetched once with apt-get download)")
	only := fs.String("binaries", "", "comma-separated binaries to build (default: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return errors.New("--version is required (make images passes VERSION)")
	}
	src, err := imagebuild.SourceOf(ctx, ".", *revision)
	if err != nil {
		return err
	}
	ca, err := imagebuild.LoadCA(ctx, *caDeb)
	if err != nil {
		return err
	}
	bins, err := selectBinaries(*only)
	if err != nil {
		return err
	}
	start := time.Now()
	images, err := imagebuild.Build(ctx, imagebuild.Options{Root: src.Root, Out: *out, Version: *version, Revision: src.Revision, Epoch: src.Epoch, CA: ca, Binaries: bins, Log: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "images: %d images (%s; ca-certificates %s, %d certificates) in %s, %s, built in %s\n",
		len(images), *version, ca.Version, ca.Count, *out, src.Epoch.Format(time.RFC3339), time.Since(start).Round(100*time.Millisecond))
	for _, img := range images {
		fmt.Fprintf(stdout, "%-14s %s (%s)\n", img.Name, img.Digest, sizes(img.Sizes))
	}
	if *push == "" {
		return nil
	}
	pushed, err := imagebuild.Push(ctx, images, strings.TrimSuffix(*push, "/"), *version)
	if err != nil {
		return err
	}
	for _, p := range pushed {
		fmt.Fprintln(stdout, p.Reference)
	}
	return nil
}

func releaseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	out := fs.String("out", "", "the release's folder (emptied first; default dist/<version>)")
	version := fs.String("version", "", "the release's version, v<major>.<minor>.<patch>[-<pre-release>] (required)")
	registry := fs.String("registry", "", "host[:port]/prefix the images and the chart are pushed to (required)")
	helm := fs.String("helm", "helm", "the helm binary that packages and pushes the chart")
	urlBase := fs.String("url-base", "", "where the plugin archives are downloaded from (default: the GitHub release of the version)")
	caDeb := fs.String("ca-deb", "", "Debian's ca-certificates .deb (default: the one in the cache folder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, err := imagebuild.SourceOf(ctx, ".", "")
	if err != nil {
		return err
	}
	ca, err := imagebuild.LoadCA(ctx, *caDeb)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(src.Root, "dist", *version)
	}
	res, err := release.Release(ctx, release.Options{Root: src.Root, Out: *out, Version: *version, Revision: src.Revision, Epoch: src.Epoch,
		CA: ca, Registry: *registry, Helm: *helm, URLBase: *urlBase, Log: stderr})
	if err != nil {
		return err
	}
	for _, img := range res.Images {
		fmt.Fprintf(stdout, "image  %-14s %s (%s)\n", img.Name, img.Reference, sizes(img.Sizes))
	}
	fmt.Fprintf(stdout, "chart  %s:%s@%s\n", res.Chart.Repo, res.Chart.Version, res.Chart.Digest)
	for _, a := range res.Plugin {
		fmt.Fprintf(stdout, "plugin %s %s\n", a.Name, a.SHA256)
	}
	fmt.Fprintf(stdout, "release %s in %s (%s, %s) in %s\n", *version, *out, release.ChecksumsFile, "krew/aicr.yaml", res.Wall.Round(100*time.Millisecond))
	return nil
}

func pluginCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	out := fs.String("out", "dist/plugin", "the folder of the archives and krew/aicr.yaml (emptied first)")
	version := fs.String("version", "", "the version stamped into the plugin (required)")
	urlBase := fs.String("url-base", "", "where the archives are downloaded from (default: the GitHub release of the version)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return errors.New("--version is required (make plugin passes VERSION)")
	}
	src, err := imagebuild.SourceOf(ctx, ".", "")
	if err != nil {
		return err
	}
	if *urlBase == "" {
		*urlBase = imagebuild.DefaultSource + "/releases/download/" + *version
	}
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	archives, err := release.Plugin(ctx, release.PluginOptions{Root: src.Root, Out: *out, Version: *version, Revision: src.Revision, Epoch: src.Epoch, URLBase: *urlBase})
	if err != nil {
		return err
	}
	if err := release.WriteChecksums(*out); err != nil {
		return err
	}
	for _, a := range archives {
		fmt.Fprintf(stdout, "%s %s\n", a.Name, a.SHA256)
	}
	fmt.Fprintf(stdout, "plugin %s in %s (krew manifest %s)\n", *version, *out, filepath.Join(*out, "krew", "aicr.yaml"))
	return nil
}

// sizes is "linux/amd64 12.3 MB, linux/arm64 11.9 MB".
func sizes(by map[string]int64) string {
	var out []string
	for _, p := range imagebuild.Platforms {
		k := p.OS + "/" + p.Architecture
		if n, ok := by[k]; ok {
			out = append(out, fmt.Sprintf("%s %.1f MB", k, float64(n)/1e6))
		}
	}
	return strings.Join(out, ", ")
}

func load(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	out := fs.String("out", "build/images/oci", "the OCI image layout make images wrote")
	repository := fs.String("repository", "aicr-operator", "the images' names in Docker: <repository>/<binary>")
	tag := fs.String("tag", "dev", "the images' tag in Docker")
	if err := fs.Parse(args); err != nil {
		return err
	}
	images, err := imagebuild.Read(*out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "docker", "load")
	pr, pw := io.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("docker load: %w", err)
	}
	werr := imagebuild.DockerArchive(pw, images, *repository, *tag, v1.Platform{OS: "linux", Architecture: runtime.GOARCH})
	pw.CloseWithError(werr)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("docker load: %w", errors.Join(err, werr))
	}
	return werr
}

func selectBinaries(only string) ([]imagebuild.Binary, error) {
	if only == "" {
		return imagebuild.Binaries, nil
	}
	var out []imagebuild.Binary
	for _, n := range strings.Split(only, ",") {
		found := false
		for _, b := range imagebuild.Binaries {
			if b.Name == n {
				out, found = append(out, b), true
			}
		}
		if !found {
			return nil, fmt.Errorf("--binaries: unknown binary %q (want some of planner, applier, readiness, credrefresher, admission, setup, kubectl-aicr)", n)
		}
	}
	return out, nil
}
