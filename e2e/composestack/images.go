package composestack

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
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
)

// The images' names in Docker: <ToolImages>/<name>:<ImageTag> for the stack's own containers,
// <OperatorImages>/<binary>:<ImageTag> for the five binaries (what make images-load loads). Each
// is also tagged with the key of its inputs, which is how a later run knows it is current.
const (
	ToolImages     = "aicr-compose"
	OperatorImages = "aicr-operator"
	ImageTag       = "dev"
)

// composeTools are the local stack's tools (hack/tools.sh names) the images hold, and
// docker-compose, which runs them.
var composeTools = []string{"etcd", "kube", "kwok", "helm", "registry", "argocd", "redis", "nats-server", "docker-compose"}

// operatorBinaries are the images of the five binaries the stack runs.
var operatorBinaries = []string{"planner", "applier", "readiness", "credrefresher", "admission"}

// toolImage is one image of the stack's own containers: files from the tools' folder (and
// aicr-compose-node) on an empty base, and its entrypoint.
type toolImage struct {
	name       string
	tools      []string
	node       bool
	entrypoint string
	libs       bool // the dynamic libraries the tools link (ldd), at the paths the loader looks
	dirs       []string
}

var toolImages = []toolImage{
	{name: "node", node: true, entrypoint: "aicr-compose-node"},
	{name: "cluster", node: true, entrypoint: "aicr-compose-node",
		tools: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "stages", "crds"}},
	// the folders of the compose file's ARGOCD_* and HELM_* variables, which Argo CD expects to exist
	{name: "argocd", tools: []string{"argocd", "helm"}, entrypoint: "argocd", dirs: []string{
		"tmp/argocd/tls", "tmp/argocd/ssh", "tmp/argocd/gnupg", "tmp/argocd/gpg", "tmp/argocd/plugins", "tmp/argocd/cmp",
		"tmp/argocd/config", "tmp/helm/cache", "tmp/helm/config", "tmp/helm/data"}},
	{name: "redis", tools: []string{"redis-server"}, entrypoint: "redis-server", libs: true},
	{name: "nats", node: true, tools: []string{"nats-server"}},
	{name: "registry", tools: []string{"registry"}, entrypoint: "registry"},
}

// cacheDir is where the images' build contexts, the OCI layout and aicr-compose-node go.
func cacheDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "aicr-operator", "compose"), nil
}

// Root is the repository root (where go.work is).
func Root(ctx context.Context) (string, error) {
	return gitOut(ctx, "", "rev-parse", "--show-toplevel")
}

// BuildImages makes sure Docker holds every image the compose file names, building only those
// whose inputs changed: the tools (hack/tools.sh builds the missing ones), aicr-compose-node and
// the five binaries (sourceKey).
// It returns the tools' folder (helm, docker-compose).
func BuildImages(ctx context.Context, root string, log io.Writer) (string, error) {
	start := time.Now()
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	if err := buildOperatorImages(ctx, root, cache, log); err != nil {
		return "", err
	}
	node := filepath.Join(cache, "bin", "aicr-compose-node")
	if err := goBuild(ctx, root, node, "./e2e/cmd/aicr-compose-node"); err != nil {
		return "", err
	}
	tools, err := toolsDir(ctx, root)
	if err != nil {
		return "", err
	}
	for _, ti := range toolImages {
		if err := buildToolImage(ctx, ti, tools, node, cache, log); err != nil {
			return "", fmt.Errorf("image %s/%s: %w", ToolImages, ti.name, err)
		}
	}
	fmt.Fprintf(log, "compose: images ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	return tools, nil
}

func toolsDir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "tools.sh"), append([]string{"bindir"}, composeTools...)...)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh bindir %s: %w", strings.Join(composeTools, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goBuild builds pkg static for linux on this machine's architecture into out.
func goBuild(ctx context.Context, root, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// imageExists reports whether Docker has the image ref.
func imageExists(ctx context.Context, ref string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", ref).Run() == nil
}

func docker(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "docker", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(b))
	}
	return nil
}

// sourceKey is the key of the five binaries' sources: every file of the repository's packages
// they import (go list -deps), and the modules' go.mod and go.sum files and go.work, so editing a
// test, a doc or another binary builds nothing.
func sourceKey(ctx context.Context, root string) (string, error) {
	pkgs := make([]string, 0, len(operatorBinaries))
	for _, b := range operatorBinaries {
		pkgs = append(pkgs, "./"+b)
	}
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -deps %s: %w", strings.Join(pkgs, " "), err)
	}
	var files []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], root+string(filepath.Separator)) {
			continue // the standard library and modules: go.sum pins them
		}
		for _, name := range f[1:] {
			files = append(files, filepath.Join(f[0], name))
		}
	}
	mods, err := filepath.Glob(filepath.Join(root, "*", "go.[ms][ou][dm]"))
	if err != nil {
		return "", err
	}
	files = append(append(files, mods...), filepath.Join(root, "go.work"))
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		if err := hashFile(h, f, rel); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func hashFile(w io.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintln(w, name)
	_, err = io.Copy(w, f)
	return err
}

// buildOperatorImages builds the five binaries' images for this machine's platform with
// e2e/imagebuild (or takes them from the e2e tests' build of the same checkout, imagebuild.Kept)
// and loads them as <OperatorImages>/<binary>:<ImageTag>, unless Docker already
// has them for this source key.
func buildOperatorImages(ctx context.Context, root, cache string, log io.Writer) error {
	key, err := sourceKey(ctx, root)
	if err != nil {
		return err
	}
	current := true
	for _, b := range operatorBinaries {
		current = current && imageExists(ctx, OperatorImages+"/"+b+":"+key)
	}
	if current {
		fmt.Fprintf(log, "compose: the five binaries' images are current (%s)\n", key)
		return retag(ctx, OperatorImages, operatorBinaries, key)
	}
	start := time.Now()
	o, err := imagebuild.CheckoutOptions(ctx, imagebuild.CheckoutVersion)
	if err != nil {
		return err
	}
	o.Root, o.Log = root, log
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	// The e2e tests' build of this checkout (every release image, both platforms), when the user
	// cache keeps it, holds these images already.
	shared, err := imagebuild.CacheDir()
	if err != nil {
		return err
	}
	all := o
	all.Binaries = imagebuild.ReleaseBinaries()
	images, kept, err := imagebuild.Kept(ctx, all, filepath.Join(shared, "images"))
	if err != nil {
		return err
	}
	if kept {
		images = slices.DeleteFunc(images, func(img imagebuild.Image) bool { return !slices.Contains(operatorBinaries, img.Name) })
		fmt.Fprintf(log, "compose: the five binaries' images from the tests' build of this checkout\n")
	} else {
		for _, b := range imagebuild.Binaries {
			if slices.Contains(operatorBinaries, b.Name) {
				o.Binaries = append(o.Binaries, b)
			}
		}
		o.Out, o.Platforms = filepath.Join(cache, "oci"), []v1.Platform{platform}
		if images, err = imagebuild.Build(ctx, o); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "docker", "load")
	pr, pw := io.Pipe()
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("docker load: %w", err)
	}
	werr := imagebuild.DockerArchive(pw, images, OperatorImages, key, platform)
	pw.CloseWithError(werr)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("docker load: %w: %s", errors.Join(err, werr), out.Bytes())
	}
	if werr != nil {
		return werr
	}
	fmt.Fprintf(log, "compose: the five binaries' images built and loaded in %s (%s)\n", time.Since(start).Round(100*time.Millisecond), key)
	return retag(ctx, OperatorImages, operatorBinaries, key)
}

// retag points <repository>/<name>:<ImageTag> at <repository>/<name>:<key>.
func retag(ctx context.Context, repository string, names []string, key string) error {
	for _, n := range names {
		if err := docker(ctx, "tag", repository+"/"+n+":"+key, repository+"/"+n+":"+ImageTag); err != nil {
			return err
		}
	}
	return nil
}

// buildToolImage builds one image of the stack's own containers FROM scratch with docker build,
// unless Docker has it for the key of its files.
func buildToolImage(ctx context.Context, ti toolImage, tools, node, cache string, log io.Writer) error {
	files := map[string]string{} // path in the image -> path here
	for _, t := range ti.tools {
		p, err := filepath.EvalSymlinks(filepath.Join(tools, t))
		if err != nil {
			return err
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() { // kwok's stages
			err := filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, err := filepath.Rel(p, path)
				files["usr/local/bin/"+t+"/"+rel] = path
				return err
			})
			if err != nil {
				return err
			}
			continue
		}
		files["usr/local/bin/"+t] = p
		if ti.libs {
			libs, err := sharedLibraries(ctx, p)
			if err != nil {
				return err
			}
			for in, here := range libs {
				files[in] = here
			}
		}
	}
	if ti.node {
		files["usr/local/bin/aicr-compose-node"] = node
	}
	dockerfile := "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp\nWORKDIR /tmp\n"
	if ti.entrypoint != "" {
		dockerfile += `ENTRYPOINT ["/usr/local/bin/` + ti.entrypoint + `"]` + "\n"
	}
	base := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":         "root:x:0:\nnonroot:x:65532:\n",
		"etc/nsswitch.conf": "hosts: files dns\n",
	}
	h := sha256.New()
	fmt.Fprintln(h, dockerfile, ti.dirs)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := hashFile(h, files[n], n); err != nil {
			return err
		}
	}
	for _, n := range []string{"etc/passwd", "etc/group", "etc/nsswitch.conf"} {
		fmt.Fprintln(h, n, base[n])
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	ref := ToolImages + "/" + ti.name
	if imageExists(ctx, ref+":"+key) {
		return retag(ctx, ToolImages, []string{ti.name}, key)
	}
	start := time.Now()
	dir := filepath.Join(cache, "contexts", ti.name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "tmp"), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(rootfs, "tmp"), 0o1777); err != nil {
		return err
	}
	for _, d := range ti.dirs {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	for n, content := range base {
		if err := writeFile(filepath.Join(rootfs, n), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := link(files[n], filepath.Join(rootfs, n)); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	if err := docker(ctx, "build", "-q", "-t", ref+":"+key, dir); err != nil {
		return err
	}
	_ = os.RemoveAll(dir)
	fmt.Fprintf(log, "compose: image %s built in %s (%s)\n", ref, time.Since(start).Round(100*time.Millisecond), key)
	return retag(ctx, ToolImages, []string{ti.name}, key)
}

// sharedLibraries are the libraries bin links and the loader (ldd), by their path in the image
// (the path the loader looks at) and here (the file behind any symlink).
func sharedLibraries(ctx context.Context, bin string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	libs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var p string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			p = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			p = f[0] // the loader
		default:
			continue
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		libs[strings.TrimPrefix(p, "/")] = resolved
	}
	return libs, nil
}

// link puts a hard link to from at to (a copy when they are on different file systems).
func link(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Link(from, to); err == nil {
		return nil
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	st, err := os.Stat(from)
	if err != nil {
		return err
	}
	return writeFile(to, data, st.Mode().Perm())
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
