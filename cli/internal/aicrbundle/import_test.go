package aicrbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

var testRepo = ociregistry.Repository{Host: "registry.test:5000", Name: "aicr"}

// fakeRegistry keeps pushed artifacts by repository:tag and answers with their manifest digest.
type fakeRegistry struct {
	mu        sync.Mutex
	manifests map[string]ociregistry.Artifact
	pushes    []string
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{manifests: map[string]ociregistry.Artifact{}}
}

func (r *fakeRegistry) Resolve(_ context.Context, ref ociregistry.Reference) (ociregistry.Descriptor, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.manifests[ref.String()]
	if !ok {
		return ociregistry.Descriptor{}, &ociregistry.Error{Op: "resolve", Ref: ref.String(), Status: 404, Kind: ociregistry.ErrNotFound}
	}
	return ociregistry.Descriptor{MediaType: ociregistry.MediaTypeImageManifest, Digest: a.Digest()}, nil
}

func (r *fakeRegistry) PushArtifact(_ context.Context, ref ociregistry.Reference, a ociregistry.Artifact) (ociregistry.Descriptor, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[ref.String()] = a
	r.pushes = append(r.pushes, ref.String())
	return ociregistry.Descriptor{MediaType: ociregistry.MediaTypeImageManifest, Digest: a.Digest()}, nil
}

func mirrorDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(filepath.Dir(exampleDir(t)), "aicr-bundle-mirror")
}

func TestPlanDependencies(t *testing.T) {
	dir := filepath.Join("testdata", "injected")
	l, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	deps := func(ps []Planned) map[string][]string {
		out := map[string][]string{}
		for _, p := range ps {
			out[p.Folder.Name] = p.DependsOn
		}
		return out
	}

	// With the recipe: dependencyRefs, each expanded to the -post and -readiness folders after
	// it; -pre before its component and after the component's dependencies.
	ps, err := Plan(l, readRecipe(t, filepath.Join(dir, "recipe.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"cert-manager":               nil,
		"network-operator-pre":       {"cert-manager"},
		"network-operator":           {"cert-manager", "network-operator-pre"},
		"network-operator-post":      {"network-operator"},
		"network-operator-readiness": {"network-operator", "network-operator-post"},
		"nvsentinel":                 {"network-operator", "network-operator-post", "network-operator-readiness"},
	}
	if diff := cmp.Diff(want, deps(ps)); diff != "" {
		t.Errorf("dependencies from the recipe (-want +got):\n%s", diff)
	}
	for _, p := range ps {
		if gate := p.Folder.Name == "network-operator-readiness"; p.ReadinessGate != gate {
			t.Errorf("%s: readinessGate %v, want %v (AICR's NNN-<component>-readiness folder)", p.Folder.Name, p.ReadinessGate, gate)
		}
	}
	if ps[5].Namespace != "nvsentinel" {
		t.Errorf("nvsentinel's namespace %q: bundle-info.yaml gives none, the recipe's componentRefs does", ps[5].Namespace)
	}

	// Without it: a chain in the numbered order; a namespace only the recipe gave is an error.
	if _, err := Plan(l, nil); err == nil || !strings.Contains(err.Error(), "006-nvsentinel") || !strings.Contains(err.Error(), "no namespace") {
		t.Fatalf("no recipe, no namespace for nvsentinel: %v; want an error naming the folder", err)
	}
	l.Folders[5].Namespace = "nvsentinel"
	ps, err = Plan(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string][]string{
		"cert-manager":               nil,
		"network-operator-pre":       {"cert-manager"},
		"network-operator":           {"network-operator-pre"},
		"network-operator-post":      {"network-operator"},
		"network-operator-readiness": {"network-operator-post", "network-operator"},
		"nvsentinel":                 {"network-operator-readiness"},
	}
	if diff := cmp.Diff(want, deps(ps)); diff != "" {
		t.Errorf("dependencies as a chain (-want +got):\n%s", diff)
	}
}

func TestImportTheExample(t *testing.T) {
	dir := exampleDir(t)
	reg := newFakeRegistry()
	l, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	recipe := readRecipe(t, filepath.Join(dir, "recipe.yaml"))

	// Nothing mirrored: every upstream chart is named, with the command that mirrors it.
	_, err = Import(t.Context(), l, reg, Options{Recipe: recipe, Repository: testRepo, PlainHTTP: true})
	var missing *Missing
	if !errors.As(err, &missing) {
		t.Fatalf("import with nothing mirrored: %v; want *Missing", err)
	}
	var refs []string
	for _, m := range missing.Charts {
		refs = append(refs, m.Ref)
	}
	wantMissing := []string{
		"registry.test:5000/aicr/charts/cert-manager:v1.20.2",
		"registry.test:5000/aicr/charts/kube-prometheus-stack:77.12.0",
		"registry.test:5000/aicr/charts/nodewright:v0.17.1",
		"registry.test:5000/aicr/charts/gpu-operator:v26.7.0",
		"registry.test:5000/aicr/charts/network-operator:26.4.1",
		"registry.test:5000/aicr/charts/nvsentinel:v0.9.0",
	}
	if diff := cmp.Diff(wantMissing, refs); diff != "" {
		t.Errorf("missing charts (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		filepath.Join(dir, "001-cert-manager", UpstreamEnvFile),
		"helm pull cert-manager --repo https://charts.jetstack.io --version v1.20.2 && helm push cert-manager-v1.20.2.tgz oci://registry.test:5000/aicr/charts --plain-http",
		"helm pull oci://ghcr.io/nvidia/nodewright/charts/nodewright --version v0.17.1 && helm push nodewright-v0.17.1.tgz oci://registry.test:5000/aicr/charts --plain-http",
		"--mirror-from FOLDER",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the missing-charts error does not say %q:\n%s", want, err)
		}
	}

	// --mirror-from pushes them; a second import finds them and pushes only the wrappers again.
	res, err := Import(t.Context(), l, reg, Options{Recipe: recipe, Repository: testRepo, MirrorFrom: mirrorDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Import(t.Context(), l, reg, Options{Recipe: recipe, Repository: testRepo})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Document, again.Document) {
		t.Errorf("two imports of one folder differ:\n%s\n---\n%s", res.Document, again.Document)
	}
	actions := map[string]ChartAction{}
	for _, c := range again.Charts {
		actions[c.Component] = c.Action
	}
	wantActions := map[string]ChartAction{
		"cert-manager": ChartFound, "kube-prometheus-stack": ChartFound, "nodewright-operator": ChartFound,
		"nodewright-customizations": ChartPushed, "gpu-operator": ChartFound, "gpu-operator-readiness": ChartPushed,
		"network-operator": ChartFound, "nvsentinel": ChartFound,
	}
	if diff := cmp.Diff(wantActions, actions); diff != "" {
		t.Errorf("chart actions of the second import (-want +got):\n%s", diff)
	}

	b, err := plan.ParseBundle(res.Document)
	if err != nil {
		t.Fatalf("the imported bundle does not parse: %v\n%s", err, res.Document)
	}
	type comp struct {
		Name, Path, Namespace string
		DependsOn             []string
		Gate                  bool
	}
	var got []comp
	for _, c := range b.Components {
		got = append(got, comp{c.Name, c.Chart.Path, c.Namespace, c.DependsOn, c.ReadinessGate})
		// every chart is pinned by what the registry holds under its reference
		var ref string
		for _, cr := range res.Charts {
			if cr.Component == c.Name {
				ref = cr.Ref
			}
		}
		if a, ok := reg.manifests[ref]; !ok || a.Digest() != c.Chart.Digest {
			t.Errorf("%s: digest %s, but the registry holds %s at %s", c.Name, c.Chart.Digest, a.Digest(), ref)
		}
	}
	wantComps := []comp{
		{"cert-manager", "charts/cert-manager", "cert-manager", nil, false},
		{"kube-prometheus-stack", "charts/kube-prometheus-stack", "monitoring", []string{"cert-manager"}, false},
		{"nodewright-operator", "charts/nodewright", "skyhook", []string{"cert-manager"}, false},
		{"nodewright-customizations", "wrappers/nodewright-customizations", "skyhook", []string{"nodewright-operator"}, false},
		{"gpu-operator", "charts/gpu-operator", "gpu-operator", []string{"cert-manager", "kube-prometheus-stack", "nodewright-customizations"}, false},
		{"gpu-operator-readiness", "wrappers/gpu-operator-readiness", "gpu-operator", []string{"gpu-operator"}, true},
		{"network-operator", "charts/network-operator", "nvidia-network-operator", []string{"cert-manager"}, false},
		{"nvsentinel", "charts/nvsentinel", "nvsentinel", []string{"cert-manager", "gpu-operator", "gpu-operator-readiness", "kube-prometheus-stack"}, false},
	}
	if diff := cmp.Diff(wantComps, got); diff != "" {
		t.Errorf("components (-want +got):\n%s", diff)
	}
	if b.Metadata.Name != DefaultName || b.Metadata.Version != "v0.22.0" {
		t.Errorf("metadata %+v, want %s at bundle-info.yaml's version v0.22.0", b.Metadata, DefaultName)
	}
	var values map[string]any
	if err := json.Unmarshal(b.Components[4].Values, &values); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"nvidia.com/gpu.present": "true"}, values["daemonsets"].(map[string]any)["nodeSelector"]); diff != "" {
		t.Errorf("gpu-operator daemonsets.nodeSelector from cluster-values.yaml (-want +got):\n%s", diff)
	}
}

// The same folder gives the same bundle and the same digests, wherever and whenever it was
// written: a copy with other modification times imports to the same bytes.
func TestImportIsReproducible(t *testing.T) {
	imported := func(dir string) []byte {
		t.Helper()
		l, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Import(t.Context(), l, newFakeRegistry(), Options{Repository: testRepo, MirrorFrom: mirrorDir(t)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Document
	}
	first := imported(exampleDir(t))
	cp := copyBundle(t, exampleDir(t))
	later := time.Now().Add(48 * time.Hour)
	if err := filepath.Walk(cp, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, later, later)
	}); err != nil {
		t.Fatal(err)
	}
	if second := imported(cp); !bytes.Equal(first, second) {
		t.Errorf("a copy imports differently:\n%s\n---\n%s", first, second)
	}
	b, err := plan.ParseBundle(first)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range b.Components {
		if want := b.Components[max(i-1, 0)].Name; i > 0 && !slices.Equal(c.DependsOn, []string{want}) {
			t.Errorf("%s depends on %v; without a recipe the folders form a chain, want [%s]", c.Name, c.DependsOn, want)
		}
	}
}

func TestPackageChart(t *testing.T) {
	src := filepath.Join(exampleDir(t), "006-gpu-operator-readiness")
	ch, err := PackageChart(src)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name != "gpu-operator-readiness" || ch.Version != "0.22.0" {
		t.Errorf("chart %s %s", ch.Name, ch.Version)
	}
	gz, err := gzip.NewReader(bytes.NewReader(ch.Archive))
	if err != nil {
		t.Fatal(err)
	}
	if !gz.ModTime.IsZero() || gz.Name != "" {
		t.Errorf("gzip header carries a time %v or name %q", gz.ModTime, gz.Name)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Mode != 0o644 {
			t.Errorf("%s: mtime %v, owner %d:%d %q, mode %o; want the fixed ones", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Mode)
		}
	}
	// helm's layout (every file under <name>/), sorted; the install script and the per-cluster
	// values are not part of the chart.
	want := []string{
		"gpu-operator-readiness/Chart.yaml",
		"gpu-operator-readiness/templates/readiness.yaml",
		"gpu-operator-readiness/values.yaml",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}
	var cfg map[string]any
	if err := json.Unmarshal(ch.Config, &cfg); err != nil || cfg["name"] != "gpu-operator-readiness" || cfg["apiVersion"] != "v2" {
		t.Errorf("config %s (%v): want Chart.yaml as JSON", ch.Config, err)
	}
	// a packaged chart reads back with the same metadata
	p := filepath.Join(t.TempDir(), "gate-0.22.0.tgz")
	if err := os.WriteFile(p, ch.Archive, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadArchive(p)
	if err != nil || back.Name != ch.Name || back.Version != ch.Version || !bytes.Equal(back.Archive, ch.Archive) {
		t.Errorf("ReadArchive: %s %s (%v)", back.Name, back.Version, err)
	}
}
