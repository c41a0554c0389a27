//go:build e2e

package imagebuild_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// built is the one build of every image the tests share.
var built struct {
	once   sync.Once
	images []imagebuild.Image
	opts   imagebuild.Options
	err    error
}

// buildOptions are make images' options for this checkout, with the tests' version and output
// folder.
func buildOptions(t testing.TB, out string) imagebuild.Options {
	t.Helper()
	o, err := imagebuild.CheckoutOptions(context.Background(), imagebuild.CheckoutVersion)
	if err != nil {
		t.Fatal(err)
	}
	o.Out, o.Log = out, io.Discard
	return o
}

// images are the release's images (the operator's and NATS's) of this checkout, built once for
// every test of this binary and of e2e/release (imagebuild.Shared: the first to ask builds, in
// the user's cache; building is minutes of CPU).
func images(t *testing.T) ([]imagebuild.Image, imagebuild.Options) {
	t.Helper()
	built.once.Do(func() {
		built.opts = buildOptions(t, "")
		cache, err := imagebuild.CacheDir()
		if err != nil {
			built.err = err
			return
		}
		o := built.opts
		o.Binaries, o.Log = imagebuild.ReleaseBinaries(), testLog{t}
		start := time.Now()
		built.images, built.opts.Out, built.err = imagebuild.Shared(context.Background(), o, filepath.Join(cache, "images"))
		t.Logf("%d images ready in %s", len(built.images), time.Since(start).Round(time.Second))
	})
	if built.err != nil {
		t.Fatalf("build the images: %v", built.err)
	}
	return built.images, built.opts
}

// TestImagesAreReproducible builds every image a second time, binaries included, and finds the
// same index digests: the images are a function of the commit.
func TestImagesAreReproducible(t *testing.T) {
	first, _ := images(t)
	o := buildOptions(t, filepath.Join(t.TempDir(), "oci"))
	o.Binaries = imagebuild.ReleaseBinaries()
	second, err := imagebuild.Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(second) {
		t.Fatalf("%d images, then %d", len(first), len(second))
	}
	for i := range first {
		if first[i].Name != second[i].Name || first[i].Digest != second[i].Digest {
			t.Errorf("%s %s, then %s %s: the same commit built different images", first[i].Name, first[i].Digest, second[i].Name, second[i].Digest)
		}
	}
	// What a layout holds is what Build returned.
	read, err := imagebuild.Read(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range read {
		if read[i].Name != second[i].Name || read[i].Digest != second[i].Digest {
			t.Errorf("the layout holds %s %s, Build returned %s %s", read[i].Name, read[i].Digest, second[i].Name, second[i].Digest)
		}
	}
}

// rootfs is one image unpacked for this machine's platform.
type rootfs struct {
	// unshare and chroot are the host's, by path: the process starts with the image's PATH.
	unshare, chroot string
	name            string
	dir             string
	config          v1.Config
	uid, gid        int
}

func unpack(t *testing.T, img imagebuild.Image, dir string) *rootfs {
	t.Helper()
	pi, err := imagebuild.PlatformImage(img.Index, v1.Platform{OS: "linux", Architecture: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := pi.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuild.Unpack(pi, dir); err != nil {
		t.Fatalf("unpack %s: %v", img.Name, err)
	}
	// the mount point of the process namespace's /proc, which a container runtime provides
	if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o555); err != nil {
		t.Fatal(err)
	}
	r := &rootfs{name: img.Name, dir: dir, config: cf.Config}
	for _, tool := range []struct {
		name string
		path *string
	}{{"unshare", &r.unshare}, {"chroot", &r.chroot}} {
		if *tool.path, err = exec.LookPath(tool.name); err != nil {
			t.Fatalf("%s (util-linux, coreutils) runs the images: %v", tool.name, err)
		}
	}
	if r.uid, r.gid, err = imagebuild.ResolveUser(dir, cf.Config.User); err != nil {
		t.Fatalf("%s: %v", img.Name, err)
	}
	return r
}

// checkImage checks what an image must hold before anything runs: a non-root user the image's
// passwd names (the chart's pods run as non-root, 65532), Debian's CA bundle where Go reads the
// system roots, the OCI labels, and the SBOM.
func checkImage(t *testing.T, r *rootfs, o imagebuild.Options) {
	t.Helper()
	if r.uid == 0 {
		t.Errorf("%s runs as root (User %q); the chart runs its pods as non-root", r.name, r.config.User)
	}
	if e, err := imagebuild.PasswdEntry(r.dir, r.uid); err != nil || e == nil {
		t.Errorf("%s: user %q (uid %d) has no entry in the image's /etc/passwd (%v)", r.name, r.config.User, r.uid, err)
	}
	bundle, err := os.ReadFile(filepath.Join(r.dir, imagebuild.CABundle))
	if err != nil {
		t.Errorf("%s: no CA bundle: %v", r.name, err)
	} else if n, err := imagebuild.CountCertificates(bundle); err != nil || n < 100 || n != o.CA.Count {
		t.Errorf("%s: %s holds %d certificates (%v), want Debian's %d", r.name, imagebuild.CABundle, n, err, o.CA.Count)
	}
	for _, sh := range []string{"bin/sh", "usr/bin/sh", "bin/bash"} {
		if _, err := os.Lstat(filepath.Join(r.dir, sh)); err == nil {
			t.Errorf("%s has a shell, /%s", r.name, sh)
		}
	}
	want := map[string]string{
		imagebuild.AnnotationSource: imagebuild.DefaultSource, imagebuild.AnnotationRevision: o.Revision,
		imagebuild.AnnotationVersion: o.Version, imagebuild.AnnotationLicenses: "Apache-2.0",
	}
	for k, v := range want {
		if got := r.config.Labels[k]; got != v {
			t.Errorf("%s: label %s = %q, want %q", r.name, k, got, v)
		}
	}
	raw, err := os.ReadFile(filepath.Join(r.dir, imagebuild.SBOMDir, r.name+".spdx.json"))
	if err != nil {
		t.Fatalf("%s: no SBOM: %v", r.name, err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name, VersionInfo string
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.SPDXVersion != "SPDX-2.3" {
		t.Fatalf("%s: the SBOM is not SPDX 2.3 JSON (%v): %.200s", r.name, err, raw)
	}
	names := map[string]string{}
	for _, p := range doc.Packages {
		names[p.Name] = p.VersionInfo
	}
	if names["stdlib"] != runtime.Version() || names["ca-certificates"] != o.CA.Version || names["github.com/aicr-run/aicr-operator/shared"] == "" {
		t.Errorf("%s: the SBOM lacks the standard library, ca-certificates or the shared module: %v", r.name, names)
	}
}

// command is how the test runs an image's entrypoint as a container runtime would: in a fresh
// mount and PID namespace (with its own /proc) rooted at the image's file system, as the image's
// user, with the image's entrypoint, command and environment, then args. The files args name (a
// kubeconfig, certificates, password files) are copied in at the same paths, readable by that
// user only, as the chart mounts its Secrets.
func (r *rootfs) command(args []string) ([]string, []string, error) {
	for _, a := range args {
		_, p, ok := strings.Cut(a, "=")
		if !ok {
			p = a
		}
		if !filepath.IsAbs(p) {
			continue
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		dst := filepath.Join(r.dir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(dst, b, 0o400); err != nil {
			return nil, nil, err
		}
		if err := os.Chown(dst, r.uid, r.gid); err != nil {
			return nil, nil, err
		}
	}
	argv := []string{r.unshare, "--mount", "--pid", "--fork", "--kill-child", "--mount-proc=" + filepath.Join(r.dir, "proc"),
		r.chroot, fmt.Sprintf("--userspec=%d:%d", r.uid, r.gid), fmt.Sprintf("--groups=%d", r.gid), r.dir}
	argv = append(append(append(argv, r.config.Entrypoint...), r.config.Cmd...), args...)
	return argv, append([]string(nil), r.config.Env...), nil
}

// flagValue is the value of --name=value in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// processOf finds the process running the image's entrypoint (its executable inside the root
// filesystem) and returns its /proc status.
func (r *rootfs) processOf() (pid int, status string, err error) {
	want := filepath.Join(r.dir, r.config.Entrypoint[0])
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, "", err
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || exe != want {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			return 0, "", err
		}
		return n, string(st), nil
	}
	return 0, "", fmt.Errorf("no process runs %s", want)
}

// statusField is a field of /proc/<pid>/status.
func statusField(status, name string) []string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestImagesRun runs every image as a container runtime would (command) against the local
// stack's API server and NATS: the five services with the chart's flags until each answers
// /readyz and /healthz and reports the build it was stamped with, the setup Job until it made
// its Secret, and the plugin's version against the API server.
func TestImagesRun(t *testing.T) {
	imgs, o := images(t)
	base := t.TempDir()
	roots := map[string]*rootfs{}
	for _, img := range imgs {
		if img.Name == imagebuild.NATS.Name {
			continue // not the operator's: e2e/release runs it, as the chart's NATS
		}
		r := unpack(t, img, filepath.Join(base, img.Name))
		checkImage(t, r, o)
		roots[img.Name] = r
	}
	if t.Failed() {
		t.FailNow()
	}

	var mu sync.Mutex
	launched := map[string][]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := stack.Up(ctx, stack.Options{Log: testLog{t}, DeferArgoCD: true,
		Launch: func(binary string, argv, _ []string) ([]string, []string, error) {
			r, ok := roots[binary]
			if !ok {
				return nil, nil, fmt.Errorf("no image for %s", binary)
			}
			mu.Lock()
			launched[binary] = argv[1:]
			mu.Unlock()
			return r.command(argv[1:])
		}})
	switch {
	case errors.Is(err, testenv.ErrToolsMissing) && os.Getenv(testenv.EnvRequireTools) != "1":
		t.Skip(err)
	case err != nil:
		t.Fatalf("the stack with every service from its image: %v", err)
	}
	t.Cleanup(func() { _ = s.Down() })

	for _, b := range stack.Binaries {
		r, args := roots[b], launched[b]
		health, metrics := flagValue(args, "health-addr"), flagValue(args, "metrics-addr")
		if code, body := get(t, "http://"+health+"/healthz"); code != http.StatusOK {
			t.Errorf("%s: /healthz = %d %s", b, code, body)
		}
		_, body := get(t, "http://"+metrics+"/metrics")
		if want := fmt.Sprintf(`aicr_build_info{binary=%q,goversion=%q,revision=%q,version=%q} 1`, b, runtime.Version(), o.Revision, o.Version); !strings.Contains(body, want) {
			t.Errorf("%s: /metrics lacks %s", b, want)
		}
		pid, status, err := r.processOf()
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		if uids := statusField(status, "Uid"); len(uids) == 0 || uids[0] != strconv.Itoa(r.uid) || uids[1] != strconv.Itoa(r.uid) {
			t.Errorf("%s (pid %d) runs as uid %v, want the image's %d", b, pid, uids, r.uid)
		}
		if ns := statusField(status, "NSpid"); len(ns) != 2 || ns[1] != "1" {
			t.Errorf("%s (pid %d): NSpid %v, want pid 1 of a PID namespace of its own", b, pid, ns)
		}
		if root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); err != nil || root != r.dir {
			t.Errorf("%s (pid %d) is rooted at %q (%v), want %s", b, pid, root, err, r.dir)
		}
	}

	// The setup Job: it makes its Secret and exits 0.
	setupSecret := "aicr-imagetest-nats-auth"
	argv, env, err := roots["setup"].command([]string{"--kubeconfig=" + s.Env.Kubeconfig, "--namespace=" + stack.OperatorNamespace, "--nats-auth-secret=" + setupSecret})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run(ctx, argv, env); err != nil {
		t.Errorf("setup from its image: %v\n%s", err, out)
	} else if _, err := s.Kube.CoreV1().Secrets(stack.OperatorNamespace).Get(ctx, setupSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("setup exited 0 but its Secret is not there: %v\n%s", err, out)
	}

	// The plugin: its version, and the API server's, which it reads over TLS.
	argv, env, err = roots["kubectl-aicr"].command([]string{"version", "-o", "json", "--kubeconfig=" + s.Env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(ctx, argv, env)
	if err != nil {
		t.Fatalf("kubectl-aicr version from its image: %v\n%s", err, out)
	}
	var v struct {
		Plugin     struct{ Version, Commit string }
		Kubernetes string
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Plugin.Version != o.Version || v.Plugin.Commit != o.Revision || v.Kubernetes == "" {
		t.Errorf("kubectl-aicr version -o json = %s (%v); want version %s, commit %s and the API server's version", out, err, o.Version, o.Revision)
	}
}

func run(ctx context.Context, argv, env []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestImagesLoadIntoDocker loads this machine's platform of every image into the local Docker
// engine, as make images-load does, and finds each with the image's user and entrypoint.
func TestImagesLoadIntoDocker(t *testing.T) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker engine to load into (docker info: %v)", err)
	}
	imgs, o := images(t)
	repo, tag := "aicr-operator-imagetest", strconv.FormatInt(time.Now().UnixNano(), 36)
	var archive bytes.Buffer
	if err := imagebuild.DockerArchive(&archive, imgs, repo, tag, v1.Platform{OS: "linux", Architecture: runtime.GOARCH}); err != nil {
		t.Fatal(err)
	}
	load := exec.Command("docker", "load")
	load.Stdin = &archive
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("docker load: %v\n%s", err, out)
	}
	for _, img := range imgs {
		ref := repo + "/" + img.Name + ":" + tag
		t.Cleanup(func() { _ = exec.Command("docker", "rmi", ref).Run() })
		out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Entrypoint}} {{index .Config.Labels \"org.opencontainers.image.revision\"}}", ref).CombinedOutput()
		if err != nil {
			t.Errorf("docker image inspect %s: %v\n%s", ref, err, out)
			continue
		}
		want := fmt.Sprintf(`%s ["%s/%s"] %s`, imagebuild.ImageUser, imagebuild.BinDir, img.Name, o.Revision)
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("docker sees %s as %q, want %q", ref, got, want)
		}
	}
}
