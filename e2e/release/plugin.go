package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
)

// PluginTargets are the platforms the plugin is built for, as GOOS/GOARCH.
var PluginTargets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// KrewTemplate is the krew manifest template, relative to the repository root.
const KrewTemplate = "deploy/krew/aicr.yaml"

// PluginOptions configure Plugin.
type PluginOptions struct {
	// Root is the repository root; Out the folder the archives and the krew manifest go to.
	Root, Out string
	// Version and Revision are stamped into the binaries.
	Version, Revision string
	// Epoch is the time of every archive entry.
	Epoch time.Time
	// URLBase is where the archives are downloaded from (the krew manifest's uri).
	URLBase string
}

// Archive is one platform's plugin archive.
type Archive struct {
	// Name is the archive's file name, in PluginOptions.Out.
	Name, OS, Arch string
	// SHA256 is the archive's sum, hex.
	SHA256 string
}

// Plugin builds kubectl-aicr for each of PluginTargets into Out: an archive per platform
// (kubectl-aicr_<version>_<os>_<arch>.tar.gz, .zip on Windows, with the binary and docs/cli.md as
// README.md) and krew/aicr.yaml, the krew manifest with each archive's URL and sha256. The
// archives are a function of the commit (fixed entry times, owners and modes).
func Plugin(ctx context.Context, o PluginOptions) ([]Archive, error) {
	if err := os.MkdirAll(filepath.Join(o.Out, "krew"), 0o755); err != nil {
		return nil, err
	}
	readme, err := os.ReadFile(filepath.Join(o.Root, "docs", "cli.md"))
	if err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(o.Root, KrewTemplate))
	if err != nil {
		return nil, err
	}
	manifest := strings.NewReplacer("@VERSION@", o.Version, "@URL_BASE@", strings.TrimSuffix(o.URLBase, "/")).Replace(string(tmpl))
	work, err := os.MkdirTemp("", "aicr-plugin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", imagebuild.BuildInfoPackage, o.Version, imagebuild.BuildInfoPackage, o.Revision)
	var out []Archive
	for _, target := range PluginTargets {
		goos, goarch, _ := strings.Cut(target, "/")
		bin := "kubectl-aicr"
		if goos == "windows" {
			bin += ".exe"
		}
		path := filepath.Join(work, goos+"-"+goarch, bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", path, "./cli/cmd/kubectl-aicr")
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build kubectl-aicr for %s: %w\n%s", target, err, b)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		files := []archiveFile{{bin, 0o755, data}, {"README.md", 0o644, readme}}
		a := Archive{OS: goos, Arch: goarch, Name: fmt.Sprintf("kubectl-aicr_%s_%s_%s", o.Version, goos, goarch)}
		var archive []byte
		if goos == "windows" {
			a.Name += ".zip"
			archive, err = zipArchive(files, o.Epoch)
		} else {
			a.Name += ".tar.gz"
			archive, err = tarGzArchive(files, o.Epoch)
		}
		if err != nil {
			return nil, fmt.Errorf("archive kubectl-aicr for %s: %w", target, err)
		}
		if err := os.WriteFile(filepath.Join(o.Out, a.Name), archive, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(archive)
		a.SHA256 = hex.EncodeToString(sum[:])
		manifest = strings.ReplaceAll(manifest, "@SHA256_"+goos+"_"+goarch+"@", a.SHA256)
		out = append(out, a)
	}
	// The template's header comment is for the template only.
	var lines []string
	for _, l := range strings.Split(manifest, "\n") {
		if !strings.HasPrefix(l, "# ") {
			lines = append(lines, l)
		}
	}
	manifest = strings.Join(lines, "\n")
	if m := placeholder.FindString(manifest); m != "" {
		return nil, fmt.Errorf("%s: placeholder %s left after filling in %d platforms", KrewTemplate, m, len(PluginTargets))
	}
	if err := os.WriteFile(filepath.Join(o.Out, "krew", "aicr.yaml"), []byte(manifest), 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

var placeholder = regexp.MustCompile(`@[A-Za-z0-9_]+@`)

type archiveFile struct {
	name string
	mode os.FileMode
	data []byte
}

func tarGzArchive(files []archiveFile, epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: int64(f.mode), Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func zipArchive(files []archiveFile, epoch time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: epoch.UTC()}
		h.SetMode(f.mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
