package release

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/imagebuild"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(dir)) // e2e/release -> the repository root
}

// TestPrepareChartNamesEveryImageByDigest prepares the repository's chart as a release does: the
// text it replaces must still be in values.yaml and Chart.yaml, and the result must name every
// image by digest, NATS's included.
func TestPrepareChartNamesEveryImageByDigest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "aicr-operator")
	digest := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	images := []Image{{Name: "planner", Digest: digest("a")}, {Name: "kubectl-aicr", Digest: digest("b")}, {Name: imagebuild.NATS.Name, Digest: digest("c")}}
	epoch := time.Unix(1_700_000_000, 0)
	if err := PrepareChart(repoRoot(t), dir, "registry.example.com/aicr", "v1.2.3-rc.1", epoch, images); err != nil {
		t.Fatal(err)
	}
	var chart struct{ Version, AppVersion string }
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &chart)
	if chart.Version != "1.2.3-rc.1" || chart.AppVersion != "v1.2.3-rc.1" {
		t.Errorf("Chart.yaml version %q appVersion %q, want 1.2.3-rc.1 and v1.2.3-rc.1", chart.Version, chart.AppVersion)
	}
	var values struct {
		Image struct {
			Registry string
			Digests  map[string]string
		}
		NATS struct {
			Image struct{ Repository, Tag, Digest string }
		} `json:"nats"`
	}
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	if values.Image.Registry != "registry.example.com/aicr" {
		t.Errorf("image.registry %q", values.Image.Registry)
	}
	if values.Image.Digests["planner"] != digest("a") || values.Image.Digests["kubectl-aicr"] != digest("b") || len(values.Image.Digests) != 2 {
		t.Errorf("image.digests %v, want planner's and kubectl-aicr's", values.Image.Digests)
	}
	if n := values.NATS.Image; n.Repository != "registry.example.com/aicr/nats-server" || n.Digest != digest("c") {
		t.Errorf("nats.image %+v, want the release's nats-server by digest", n)
	}
	st, err := os.Stat(filepath.Join(dir, "templates", "tests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().Equal(epoch) {
		t.Errorf("templates/tests.yaml has time %s, want the epoch %s", st.ModTime(), epoch)
	}
	if err := PrepareChart(repoRoot(t), filepath.Join(t.TempDir(), "c"), "r.example.com/x", "v1.0.0", epoch, images[:2]); err == nil {
		t.Error("a release without the nats-server image prepared the chart")
	}
}

// TestKrewTemplateHasEveryPluginTarget requires a platform in deploy/krew/aicr.yaml for each
// target the plugin is built for, with the placeholders Plugin fills in, and no other.
func TestKrewTemplateHasEveryPluginTarget(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), KrewTemplate))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"@VERSION@": true, "@URL_BASE@": true}
	for _, target := range PluginTargets {
		os, arch, _ := strings.Cut(target, "/")
		want["@SHA256_"+os+"_"+arch+"@"] = true
		if !strings.Contains(string(data), "matchLabels: {os: "+os+", arch: "+arch+"}") {
			t.Errorf("%s has no platform for %s", KrewTemplate, target)
		}
	}
	for _, p := range regexp.MustCompile(`@[A-Za-z0-9_]+@`).FindAllString(string(data), -1) {
		if !want[p] {
			t.Errorf("%s: placeholder %s is not one Plugin fills in", KrewTemplate, p)
		}
	}
}

// TestArchivesAreAFunctionOfTheirContent writes each archive kind twice and finds the same bytes.
func TestArchivesAreAFunctionOfTheirContent(t *testing.T) {
	files := []archiveFile{{"kubectl-aicr", 0o755, []byte("binary")}, {"README.md", 0o644, []byte("# read me")}}
	epoch := time.Unix(1_700_000_000, 0)
	for name, write := range map[string]func([]archiveFile, time.Time) ([]byte, error){"tar.gz": tarGzArchive, "zip": zipArchive} {
		a, err := write(files, epoch)
		if err != nil {
			t.Fatal(err)
		}
		b, err := write(files, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s: two writes of the same files differ", name)
		}
	}
}

// TestChecksumsListEveryFile writes SHA256SUMS over a folder with a subfolder.
func TestChecksumsListEveryFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "krew"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{"a.tgz": "a", "krew/aicr.yaml": "b"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteChecksums(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.tgz\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  krew/aicr.yaml\n"
	if string(got) != want {
		t.Errorf("%s:\n%s\nwant:\n%s", ChecksumsFile, got, want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
