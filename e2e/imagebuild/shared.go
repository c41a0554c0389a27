package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// CheckoutVersion is the version stamped into images built from a checkout rather than
// released: the e2e tests' and the compose stack's. One version for all of them lets them share
// one build (Shared, Kept).
const CheckoutVersion = "v0.0.0-dev"

// sharedKeep is how many builds Shared keeps in its cache folder: the newest, by the time each
// was last used.
const sharedKeep = 4

// Shared is Build once per set of inputs: the first call builds into cache/<key>/oci, and every
// later call with the same inputs, in this process or another, reads that layout back. The key
// is everything the images are a function of: o's version, revision, epoch, source, binaries
// and platforms, the CA certificates, the Go toolchain, and the repository's state (HEAD, the
// uncommitted diff and the untracked files). Concurrent callers wait for one build (a lock
// file), so two test packages that both need the images build them once. o.Out is ignored.
// It returns the images and the layout's folder.
func Shared(ctx context.Context, o Options, cache string) ([]Image, string, error) {
	o, key, err := o.sharedKey(ctx)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, key+".lock"))
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	dir := filepath.Join(cache, key)
	out := filepath.Join(dir, "oci")
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // the newest used, for pruning
		images, err := Read(out)
		if err == nil {
			fmt.Fprintf(o.Log, "images: the build of these inputs is in %s (%s)\n", dir, key)
			return images, out, nil
		}
		fmt.Fprintf(o.Log, "images: the kept build %s is unreadable (%v); building again\n", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", err
	}
	o.Out = out
	images, err := Build(ctx, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	if err := os.WriteFile(done, []byte(key+"\n"), 0o644); err != nil {
		return nil, "", err
	}
	prune(cache, key)
	return images, out, nil
}

// Kept returns the images of a finished Shared build of o's inputs in cache, and false when
// there is none; it never builds.
func Kept(ctx context.Context, o Options, cache string) ([]Image, bool, error) {
	_, key, err := o.sharedKey(ctx)
	if err != nil {
		return nil, false, err
	}
	dir := filepath.Join(cache, key)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		return nil, false, nil
	}
	images, err := Read(filepath.Join(dir, "oci"))
	if err != nil {
		return nil, false, nil // Shared builds it again
	}
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	return images, true, nil
}

// sharedKey fills o's defaults (Out is not needed: the layout goes under the cache) and returns
// o with the key of its inputs, as Shared and Kept name a build.
func (o Options) sharedKey(ctx context.Context) (Options, string, error) {
	o.Out = "-"
	if err := o.defaults(); err != nil {
		return o, "", err
	}
	key, err := o.key(ctx)
	return o, key, err
}

// key is the hash of everything Build's output depends on.
func (o Options) key(ctx context.Context) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "version %s\nrevision %s\nepoch %d\nsource %s\ngo %s\nca %s %d\n",
		o.Version, o.Revision, o.Epoch.Unix(), o.Source, runtime.Version(), o.CA.Version, o.CA.Count)
	h.Write(o.CA.Bundle)
	for _, b := range o.Binaries {
		fmt.Fprintf(h, "binary %s %s\n", b.Name, b.Package)
	}
	for _, p := range o.Platforms {
		fmt.Fprintf(h, "platform %s/%s\n", p.OS, p.Architecture)
	}
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", o.Root}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"diff", "HEAD", "--binary"}} {
		out, err := git(args...)
		if err != nil {
			return "", err
		}
		h.Write(out)
	}
	untracked, err := git("ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return "", err
	}
	for _, name := range strings.Split(string(untracked), "\x00") {
		if name == "" {
			continue
		}
		f, err := os.Open(filepath.Join(o.Root, name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", err
		}
		fmt.Fprintf(h, "untracked %s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// lockFile takes an exclusive lock on path, waiting for another holder (a process or this one)
// until ctx ends.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the image build holding %s: %w", path, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// prune removes the builds in cache beyond the sharedKeep most recently used, never keep and
// never one whose lock another caller holds.
func prune(cache, keep string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	type build struct {
		key  string
		used time.Time
	}
	var builds []build
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		builds = append(builds, build{e.Name(), info.ModTime()})
	}
	slices.SortFunc(builds, func(a, b build) int { return b.used.Compare(a.used) })
	for i, b := range builds {
		if i < sharedKeep-1 {
			continue
		}
		lock := filepath.Join(cache, b.key+".lock")
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(filepath.Join(cache, b.key))
			_ = os.Remove(lock)
		}
		f.Close()
	}
}
