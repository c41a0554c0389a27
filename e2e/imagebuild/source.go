package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is what a build takes from the checkout: the repository's root, the revision stamped
// into the binaries and labels, and the time of every timestamp.
type Source struct {
	Root     string
	Revision string
	Epoch    time.Time
}

// SourceOf reads the Source of the checkout holding dir: its root (git rev-parse
// --show-toplevel), revision (the one given, else git rev-parse HEAD) and epoch
// (SOURCE_DATE_EPOCH, else the time of the commit HEAD). make images, make release, make plugin
// and their tests all take it from here, so they stamp the same commit the same way.
func SourceOf(ctx context.Context, dir, revision string) (Source, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return Source{}, err
	}
	if revision == "" {
		if revision, err = git("rev-parse", "HEAD"); err != nil {
			return Source{}, err
		}
	}
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		if s, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return Source{}, err
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return Source{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970: %w", s, err)
	}
	return Source{Root: root, Revision: revision, Epoch: time.Unix(sec, 0).UTC()}, nil
}

// LoadCA reads the ca-certificates .deb named, or, when deb is "", the one in the user's cache
// folder (FindCADeb: fetched once with apt-get download).
func LoadCA(ctx context.Context, deb string) (*CACertificates, error) {
	if deb == "" {
		cache, err := CacheDir()
		if err != nil {
			return nil, err
		}
		if deb, err = FindCADeb(ctx, filepath.Join(cache, "debs")); err != nil {
			return nil, err
		}
	}
	return ReadCADeb(ctx, deb)
}

// CacheDir is the project's folder in the user's cache (~/.cache/aicr-operator), where the
// ca-certificates .deb and Shared's builds are kept.
func CacheDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "aicr-operator"), nil
}

// CheckoutOptions are Build's options for the checkout of the working directory at version: its
// root, revision and epoch (SourceOf) and the cached CA certificates (LoadCA). Out, Binaries,
// Platforms and Log are the caller's.
func CheckoutOptions(ctx context.Context, version string) (Options, error) {
	s, err := SourceOf(ctx, ".", "")
	if err != nil {
		return Options{}, err
	}
	ca, err := LoadCA(ctx, "")
	if err != nil {
		return Options{}, err
	}
	return Options{Root: s.Root, Version: version, Revision: s.Revision, Epoch: s.Epoch, CA: ca}, nil
}
