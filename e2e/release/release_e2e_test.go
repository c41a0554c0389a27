//go:build e2e

package release_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
	"github.com/aicr-run/aicr-operator/e2e/release"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{Kwok: true, ArgoCD: true, Registry: true}))
}

// Named timeouts: the release compiles eight binaries for two platforms and the plugin for six
// (minutes of CPU on a loaded machine; with Go's build cache cold, every dependency once per
// platform: more than 25 minutes on a loaded 2-core machine); Argo CD syncs the chart in well
// under a minute idle. make test's NORACE_TEST_TIMEOUT is above testTimeout.
const (
	releaseTimeout = 50 * time.Minute
	syncedTimeout  = 5 * time.Minute
	testTimeout    = 58 * time.Minute
	releaseNS      = "aicr-system"
	appName        = "aicr-operator"
	testVersion    = imagebuild.CheckoutVersion
	// helmChartLayer is the media type of a Helm chart's content in an OCI manifest.
	helmChartLayer = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// TestReleaseInstallsWithArgoCDByDigest runs make release's code against the local registry,
// checks what it wrote (the checksums, the krew manifest's sums, the archives), has Argo CD
// install the operator from the released OCI chart at its digest, and requires every image the
// chart renders to be named by digest and present in the registry for linux/amd64 and
// linux/arm64, manifests and layers.
func TestReleaseInstallsWithArgoCDByDigest(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	root := charttest.RepoRoot(t)
	helm := charttest.Tool(t, "helm")
	home := t.TempDir()
	helmEnv := append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	registry := env.Registry.Host + "/aicr"
	out := filepath.Join(t.TempDir(), testVersion)

	rctx, rcancel := context.WithTimeout(ctx, releaseTimeout)
	res, err := release.Release(rctx, releaseOptions(t, out, registry, helm, helmEnv))
	rcancel()
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	t.Logf("release %s in %s; chart %s@%s", testVersion, res.Wall.Round(time.Second), res.Chart.Repo, res.Chart.Digest)
	for _, img := range res.Images {
		t.Logf("image %-14s linux/amd64 %.1f MB, linux/arm64 %.1f MB", img.Name, float64(img.Sizes["linux/amd64"])/1e6, float64(img.Sizes["linux/arm64"])/1e6)
	}

	sums := checkChecksums(t, out)
	checkKrewManifest(t, out, res, sums)

	// Argo CD installs the operator from the released chart, by digest, with the Application
	// docs/install.md shows.
	if err := env.CreateOCIRepoSecret(ctx, "aicr-operator-release", res.Chart.Repo); err != nil {
		t.Fatal(err)
	}
	app, values := docApplication(t, root, registry, res.Chart)
	apps := dynamic.NewForConfigOrDie(env.Config).Resource(testenv.ApplicationGVR).Namespace(testenv.ArgoCDNamespace)
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Application: %v", err)
	}
	var last map[string]any
	err = testenv.WaitFor(ctx, syncedTimeout, "the operator's Application Synced, Healthy and Succeeded at the chart's digest", func(ctx context.Context) (bool, error) {
		got, err := apps.Get(ctx, appName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last, _, _ = unstructured.NestedMap(got.Object, "status")
		sync, _, _ := unstructured.NestedString(got.Object, "status", "sync", "status")
		rev, _, _ := unstructured.NestedString(got.Object, "status", "sync", "revision")
		health, _, _ := unstructured.NestedString(got.Object, "status", "health", "status")
		phase, _, _ := unstructured.NestedString(got.Object, "status", "operationState", "phase")
		if sync == "Synced" && health == "Healthy" && phase == "Succeeded" && rev == res.Chart.Digest {
			return true, nil
		}
		return false, fmt.Errorf("sync %q at %q, health %q, operation %q", sync, rev, health, phase)
	})
	if err != nil {
		raw, _ := json.MarshalIndent(last, "", "  ")
		t.Fatalf("%v\nlast status: %s\nrepo-server log: %s", err, raw, env.LogPath(testenv.ProcRepoServer))
	}

	// The render: the chart at the digest Argo CD installed, with the Application's values, hooks
	// (the setup Job, the test hook) included.
	chart := pullChart(ctx, t, res.Chart.Repo, res.Chart.Digest, sums)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(valuesFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Rendered for the test's API server, as Argo CD renders it (helm's default, v1.20, is
	// below the chart's kubeVersion).
	kc := kubernetes.NewForConfigOrDie(env.Config)
	server, err := kc.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := charttest.Run(t, "", helmEnv[len(os.Environ()):], helm, "template", appName, chart, "-n", releaseNS, "-f", valuesFile, "--kube-version", server.GitVersion)
	if err != nil {
		t.Fatalf("helm template the released chart: %v", err)
	}
	refs := map[string]bool{}
	for _, o := range charttest.Decode(t, rendered) {
		for _, ref := range podImages(o) {
			refs[ref] = true
		}
	}
	// What Argo CD applied names the same images.
	deps, err := kc.AppsV1().Deployments(releaseNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sts, err := kc.AppsV1().StatefulSets(releaseNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, d := range deps.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			live++
			if !refs[c.Image] {
				t.Errorf("Deployment %s runs %s, not in the released chart's render", d.Name, c.Image)
			}
		}
	}
	for _, s := range sts.Items {
		for _, c := range s.Spec.Template.Spec.Containers {
			live++
			if !refs[c.Image] {
				t.Errorf("StatefulSet %s runs %s, not in the released chart's render", s.Name, c.Image)
			}
		}
	}
	if live < 6 {
		t.Errorf("%d containers live in %s, want the five binaries' and NATS's", live, releaseNS)
	}
	var names []string
	for ref := range refs {
		names = append(names, ref)
	}
	slices.Sort(names)
	for _, b := range imagebuild.ReleaseBinaries() {
		want := b.Name
		if !slices.ContainsFunc(names, func(r string) bool { return strings.HasPrefix(r, registry+"/"+want+"@") }) {
			t.Errorf("the render names no %s image by digest in %s: %v", want, registry, names)
		}
	}
	for _, ref := range names {
		checkInRegistry(ctx, t, env.Registry.Host, ref)
	}
}

// installDoc is the page whose "Install with Argo CD" Application the test creates as written.
const installDoc = "docs/install.md"

// docApplication is the Application installDoc shows under "## Install with Argo CD", as a user
// copies it: the example registry replaced by the release's, targetRevision by the chart's
// digest. One value is added, because the test's cluster (kwok) has no storage provisioner: NATS
// keeps its streams in memory. It returns the Application and its Helm values.
func docApplication(t *testing.T, root, registry string, chart release.Chart) (*unstructured.Unstructured, map[string]any) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, installDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Install with Argo CD\n")
	if !ok {
		t.Fatalf("%s has no section \"## Install with Argo CD\"", installDoc)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatalf("%s: \"Install with Argo CD\" shows no yaml block", installDoc)
	}
	block, _, _ = strings.Cut(block, "```")
	const example = "registry.example.com/aicr"
	if !strings.Contains(block, "oci://"+example+"/charts/aicr-operator") {
		t.Fatalf("%s's Application does not install oci://%s/charts/aicr-operator:\n%s", installDoc, example, block)
	}
	block = strings.ReplaceAll(block, example, registry)
	app := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(block), &app.Object); err != nil {
		t.Fatalf("%s's Application: %v\n%s", installDoc, err, block)
	}
	if app.GetKind() != "Application" || app.GetName() != appName || app.GetNamespace() != testenv.ArgoCDNamespace {
		t.Fatalf("%s shows %s %s/%s, want Application %s/%s", installDoc, app.GetKind(), app.GetNamespace(), app.GetName(), testenv.ArgoCDNamespace, appName)
	}
	if rev, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision"); !strings.HasPrefix(rev, "sha256:") {
		t.Fatalf("%s's Application pins targetRevision %q, want the chart's digest (sha256:…)", installDoc, rev)
	}
	if repo, _, _ := unstructured.NestedString(app.Object, "spec", "source", "repoURL"); repo != chart.Repo {
		t.Fatalf("%s's Application installs %s, the release is %s", installDoc, repo, chart.Repo)
	}
	if err := unstructured.SetNestedField(app.Object, chart.Digest, "spec", "source", "targetRevision"); err != nil {
		t.Fatal(err)
	}
	values, _, err := unstructured.NestedMap(app.Object, "spec", "source", "helm", "valuesObject")
	if err != nil || values == nil {
		t.Fatalf("%s's Application has no helm.valuesObject (%v)", installDoc, err)
	}
	values["nats"] = map[string]any{"jetstream": map[string]any{"storage": map[string]any{"persistent": false}}}
	if err := unstructured.SetNestedMap(app.Object, values, "spec", "source", "helm", "valuesObject"); err != nil {
		t.Fatal(err)
	}
	return app, values
}

// releaseOptions are make release's options for this checkout, with the tests' version and the
// images e2e/imagebuild's tests also use (imagebuild.Shared: one build for both packages).
func releaseOptions(t *testing.T, out, registry, helm string, helmEnv []string) release.Options {
	t.Helper()
	ctx := context.Background()
	o, err := imagebuild.CheckoutOptions(ctx, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := imagebuild.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o.Binaries, o.Log = imagebuild.ReleaseBinaries(), testLog{t}
	start := time.Now()
	images, _, err := imagebuild.Shared(ctx, o, filepath.Join(cache, "images"))
	if err != nil {
		t.Fatalf("build the images: %v", err)
	}
	t.Logf("%d images ready in %s", len(images), time.Since(start).Round(time.Second))
	return release.Options{Root: o.Root, Out: out, Version: testVersion, Revision: o.Revision,
		Epoch: o.Epoch, CA: o.CA, Registry: registry, Helm: helm, HelmEnv: helmEnv, Images: images,
		URLBase: "https://example.com/releases/" + testVersion, Log: testLog{t}}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkChecksums requires SHA256SUMS to list every other file of the release with its sum, and
// returns the sums by file.
func checkChecksums(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, release.ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q is not <sha256>  <file>", release.ChecksumsFile, sc.Text())
		}
		sums[file] = sum
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != release.ChecksumsFile {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); sums[f] != got {
			t.Errorf("%s: %s has sum %q listed, %s computed", release.ChecksumsFile, f, sums[f], got)
		}
	}
	if len(sums) != len(files) {
		t.Errorf("%s lists %d files, the release has %d besides it: %v", release.ChecksumsFile, len(sums), len(files), files)
	}
	chart := "aicr-operator-" + strings.TrimPrefix(testVersion, "v") + ".tgz" // helm drops the v of a SemVer
	for _, want := range []string{"images.txt", "release-notes.md", "krew/aicr.yaml", chart} {
		if _, ok := sums[want]; !ok {
			t.Errorf("the release has no %s", want)
		}
	}
	return sums
}

// checkKrewManifest requires a platform in the krew manifest for each plugin target, whose sha256
// is the archive's and whose archive holds the binary the manifest names.
func checkKrewManifest(t *testing.T, dir string, res release.Result, sums map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "krew", "aicr.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("krew/aicr.yaml: %v", err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "aicr" {
		t.Errorf("krew/aicr.yaml: %s %s %q, want a krew v1alpha2 Plugin named aicr", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != testVersion {
		t.Errorf("krew/aicr.yaml: version %q, want %q", m.Spec.Version, testVersion)
	}
	if len(m.Spec.Platforms) != len(release.PluginTargets) {
		t.Errorf("krew/aicr.yaml: %d platforms, want %d", len(m.Spec.Platforms), len(release.PluginTargets))
	}
	for _, p := range m.Spec.Platforms {
		file := filepath.Base(p.URI)
		target := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		if !slices.Contains(release.PluginTargets, target) {
			t.Errorf("krew/aicr.yaml: platform %s is not a plugin target", target)
		}
		if p.SHA256 == "" || p.SHA256 != sums[file] {
			t.Errorf("krew/aicr.yaml: %s has sha256 %q, SHA256SUMS %q", file, p.SHA256, sums[file])
		}
		if got := archiveFiles(t, filepath.Join(dir, file)); !slices.Contains(got, p.Bin) {
			t.Errorf("%s holds %v, not the manifest's bin %s", file, got, p.Bin)
		}
	}
	if len(res.Plugin) != len(release.PluginTargets) {
		t.Errorf("%d plugin archives, want %d", len(res.Plugin), len(release.PluginTargets))
	}
}

func archiveFiles(t *testing.T, path string) []string {
	t.Helper()
	var names []string
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		return names
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// pullChart fetches the chart at digest from its OCI repository (oci://host/path), requires its
// content to be the released archive, and writes it to a file.
func pullChart(ctx context.Context, t *testing.T, repo, digest string, sums map[string]string) string {
	t.Helper()
	ref, err := name.NewDigest(strings.TrimPrefix(repo, "oci://") + "@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("the chart at %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if string(l.MediaType) != helmChartLayer {
			continue
		}
		if !slices.Contains(slices.Collect(maps.Values(sums)), l.Digest.Hex) {
			t.Errorf("the chart's content %s is not a file of the release (SHA256SUMS)", l.Digest)
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		path := filepath.Join(t.TempDir(), "chart.tgz")
		data, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Fatalf("the manifest at %s has no %s layer", ref, helmChartLayer)
	return ""
}

// podImages are the images of every container and init container of a workload or Pod.
func podImages(o *unstructured.Unstructured) []string {
	var paths [][]string
	switch o.GetKind() {
	case "Pod":
		paths = [][]string{{"spec"}}
	case "Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet":
		paths = [][]string{{"spec", "template", "spec"}}
	case "CronJob":
		paths = [][]string{{"spec", "jobTemplate", "spec", "template", "spec"}}
	}
	var out []string
	for _, p := range paths {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(p), field)...)
			for _, c := range cs {
				if img, ok := c.(map[string]any)["image"].(string); ok {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// checkInRegistry requires ref to be in the local registry at host by digest, an index with an
// image for linux/amd64 and linux/arm64 whose config and layers the registry holds.
func checkInRegistry(ctx context.Context, t *testing.T, host, ref string) {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Errorf("%s is not an image reference by digest: %v", ref, err)
		return
	}
	if d.RegistryStr() != host {
		t.Errorf("%s is not in the release's registry %s", ref, host)
		return
	}
	idx, err := remote.Index(d, remote.WithContext(ctx))
	if err != nil {
		t.Errorf("%s: %v", ref, err)
		return
	}
	for _, p := range imagebuild.Platforms {
		img, err := imagebuild.PlatformImage(idx, p)
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		m, err := img.Manifest()
		if err != nil {
			t.Errorf("%s for %s: %v", ref, p.OS+"/"+p.Architecture, err)
			continue
		}
		for _, blob := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			url := fmt.Sprintf("http://%s/v2/%s/blobs/%s", host, d.RepositoryStr(), blob.Digest)
			req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("HEAD %s: %v", url, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s for %s: blob %s answers %s", ref, p.OS+"/"+p.Architecture, blob.Digest, resp.Status)
			}
		}
	}
}
