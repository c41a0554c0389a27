// Package aicrbundle reads the bundle folder `aicr bundle` writes (AICR's local, numbered layout)
// and turns it into this operator's bundle document: one component per numbered folder, its
// values the folder's values.yaml merged with cluster-values.yaml, its chart either the folder
// itself (packaged and pushed under wrappers/) or the upstream chart upstream.env names (expected
// mirrored under charts/), every chart pinned by the digest the registry reports.
//
// The layout, as AICR's bundler writes it:
//
//	bundle-info.yaml        kind BundleInfo (aicr.run/v1): layout.releases[] {name, component, namespace, path}
//	checksums.txt           "<sha256 hex>  <relative path>" per file (sha256sum's format)
//	recipe.yaml             the RecipeResult the bundle was built from
//	001-cert-manager/       values.yaml, cluster-values.yaml, upstream.env (CHART, REPO, VERSION), install.sh
//	002-gpu-operator/       ... the same, for an upstream chart
//	003-gpu-operator-readiness/   Chart.yaml, templates/, values.yaml, cluster-values.yaml: a local chart
//
// A folder is a local chart when it holds Chart.yaml (AICR's one branch point), else an upstream
// chart when it holds upstream.env; anything else is refused.
package aicrbundle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Files of the layout.
const (
	BundleInfoFile    = "bundle-info.yaml"
	ChecksumsFile     = "checksums.txt"
	ValuesFile        = "values.yaml"
	ClusterValuesFile = "cluster-values.yaml"
	UpstreamEnvFile   = "upstream.env"
	ChartFile         = "Chart.yaml"
)

// AICR's artifact identifiers this package reads.
const (
	BundleInfoKind       = "BundleInfo"
	BundleInfoAPIVersion = "aicr.run/v1"
)

// Suffixes AICR reserves for the folders it injects around a component: -pre before it, -post
// after it (its raw manifests), -readiness after both (the readiness gate).
const (
	SuffixPre       = "-pre"
	SuffixPost      = "-post"
	SuffixReadiness = "-readiness"
)

// maxFileBytes bounds each file the import reads (values, metadata, checksums).
const maxFileBytes = 8 << 20

// folderRE is a component folder: a three-digit index and the release name.
var folderRE = regexp.MustCompile(`^([0-9]{3})-(.+)$`)

// nameRE is a release name the operator accepts: a DNS-1123 label of at most 53 characters.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$`)

// Kind says where a folder's chart comes from.
type Kind string

// Folder kinds.
const (
	// KindLocalChart is a folder with its own Chart.yaml: packaged and pushed to wrappers/<name>.
	KindLocalChart Kind = "local"
	// KindUpstream is a folder whose upstream.env names an upstream chart, expected mirrored
	// under charts/<chart>.
	KindUpstream Kind = "upstream"
)

// Upstream is upstream.env: the chart, its repository (empty for an OCI chart, whose CHART is
// the full oci:// reference) and its version.
type Upstream struct {
	Chart   string
	Repo    string
	Version string
}

// Name is the chart's name: CHART's last path element (an OCI reference or a plain name).
func (u Upstream) Name() string {
	c := strings.TrimRight(u.Chart, "/")
	if i := strings.LastIndex(c, "/"); i >= 0 {
		return c[i+1:]
	}
	return c
}

// Folder is one numbered folder: one release.
type Folder struct {
	// Index is the folder's number; Dir its name (001-cert-manager); Name the release name.
	Index int
	Dir   string
	Name  string
	// Path is the folder's path (the bundle directory joined with Dir).
	Path string
	Kind Kind
	// Upstream is set for KindUpstream.
	Upstream *Upstream
	// Namespace is the release's namespace (bundle-info.yaml's layout.releases, else the recipe).
	Namespace string
	// Component is the component the release belongs to: its own name, or for an injected
	// -pre/-post/-readiness folder the parent's (bundle-info.yaml's layout.releases[].component).
	Component string
	// Values is values.yaml merged with cluster-values.yaml (MergeValues).
	Values map[string]any
}

// BundleInfo is the part of AICR's bundle-info.yaml the import reads.
type BundleInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Version string `json:"version"`
	} `json:"metadata"`
	Build struct {
		Deployer string `json:"deployer"`
		Recipe   struct {
			Path    string `json:"path"`
			Digest  string `json:"digest"`
			Version string `json:"version"`
		} `json:"recipe"`
	} `json:"build"`
	Layout struct {
		Releases []Release `json:"releases"`
	} `json:"layout"`
}

// Release is one entry of bundle-info.yaml's layout.releases.
type Release struct {
	Name      string `json:"name"`
	Component string `json:"component"`
	Namespace string `json:"namespace"`
	Path      string `json:"path"`
}

// Layout is a read AICR bundle folder.
type Layout struct {
	Dir     string
	Info    BundleInfo
	Folders []Folder
	// Checked counts the checksums.txt entries verified (0: no checksums.txt).
	Checked int
}

// LayoutError is a bad layout: the path of the offending file or folder, what is wrong and
// what is accepted.
type LayoutError struct {
	Path    string
	Message string
}

func (e *LayoutError) Error() string { return e.Path + ": " + e.Message }

func layoutErr(path, format string, args ...any) error {
	return &LayoutError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// Read reads and checks the bundle folder dir: bundle-info.yaml, checksums.txt (every entry is
// verified when it is there), and every numbered folder.
func Read(dir string) (*Layout, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, layoutErr(dir, "cannot read the bundle folder: %v", errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, layoutErr(dir, "not a folder; give the folder `aicr bundle` wrote (numbered NNN-<component>/ folders, %s, %s)", BundleInfoFile, ChecksumsFile)
	}
	l := &Layout{Dir: dir}
	if err := l.readInfo(); err != nil {
		return nil, err
	}
	if l.Checked, err = verifyChecksums(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, layoutErr(dir, "cannot list the bundle folder: %v", err)
	}
	releases := map[string]Release{}
	for _, r := range l.Info.Layout.Releases {
		releases[filepath.Clean(r.Path)] = r
	}
	seen := map[int]string{}
	for _, e := range entries {
		m := folderRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue // deploy.sh, README.md, recipe.yaml, attestation/, ...
		}
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			return nil, layoutErr(p, "a numbered entry must be a component folder NNN-<component>/")
		}
		idx, _ := strconv.Atoi(m[1])
		if prev, dup := seen[idx]; dup {
			return nil, layoutErr(p, "folder number %s is also used by %s; each NNN- prefix is used once", m[1], prev)
		}
		seen[idx] = e.Name()
		if !nameRE.MatchString(m[2]) {
			return nil, layoutErr(p, "%q is not a release name the operator accepts: a lowercase DNS-1123 label of at most 53 characters (a-z, 0-9, '-')", m[2])
		}
		f, err := readFolder(p, e.Name(), idx, m[2])
		if err != nil {
			return nil, err
		}
		if r, ok := releases[e.Name()]; ok {
			f.Namespace, f.Component = r.Namespace, r.Component
		} else if len(releases) > 0 {
			return nil, layoutErr(p, "folder is not listed in %s layout.releases (paths listed: %s); the folder and the build record disagree", BundleInfoFile, releasePaths(l.Info.Layout.Releases))
		}
		l.Folders = append(l.Folders, f)
	}
	if len(l.Folders) == 0 {
		return nil, layoutErr(dir, "no component folders: `aicr bundle` writes one NNN-<component>/ folder per release (001-cert-manager/, ...)")
	}
	sort.Slice(l.Folders, func(i, j int) bool { return l.Folders[i].Index < l.Folders[j].Index })
	for _, r := range l.Info.Layout.Releases {
		if _, err := os.Stat(filepath.Join(dir, r.Path)); err != nil {
			return nil, layoutErr(filepath.Join(dir, BundleInfoFile), "layout.releases names %s (release %s), which is not in the bundle folder", r.Path, r.Name)
		}
	}
	return l, nil
}

func releasePaths(rs []Release) string {
	ps := make([]string, 0, len(rs))
	for _, r := range rs {
		ps = append(ps, r.Path)
	}
	return strings.Join(ps, ", ")
}

func (l *Layout) readInfo() error {
	p := filepath.Join(l.Dir, BundleInfoFile)
	raw, err := readLimited(p)
	if err != nil {
		return layoutErr(p, "missing or unreadable (%v): `aicr bundle` writes this build record (kind %s, apiVersion %s) at the bundle's root", err, BundleInfoKind, BundleInfoAPIVersion)
	}
	if err := yaml.Unmarshal(raw, &l.Info); err != nil {
		return layoutErr(p, "not a %s document: %v", BundleInfoKind, err)
	}
	if l.Info.Kind != BundleInfoKind || l.Info.APIVersion != BundleInfoAPIVersion {
		return layoutErr(p, "kind %q, apiVersion %q: kind %s, apiVersion %s is accepted", l.Info.Kind, l.Info.APIVersion, BundleInfoKind, BundleInfoAPIVersion)
	}
	for i, r := range l.Info.Layout.Releases {
		if r.Path == "" || !filepath.IsLocal(r.Path) {
			return layoutErr(p, "layout.releases[%d].path %q: a folder inside the bundle is required", i, r.Path)
		}
	}
	return nil
}

func readFolder(p, dir string, idx int, name string) (Folder, error) {
	f := Folder{Index: idx, Dir: dir, Name: name, Path: p, Component: name}
	hasChart, hasEnv := exists(filepath.Join(p, ChartFile)), exists(filepath.Join(p, UpstreamEnvFile))
	switch {
	case hasChart:
		f.Kind = KindLocalChart
	case hasEnv:
		f.Kind = KindUpstream
		u, err := readUpstreamEnv(filepath.Join(p, UpstreamEnvFile))
		if err != nil {
			return f, err
		}
		f.Upstream = &u
	default:
		return f, layoutErr(p, "neither %s nor %s: a component folder is a local chart (%s and templates/) or names an upstream chart (%s with CHART, REPO, VERSION)", ChartFile, UpstreamEnvFile, ChartFile, UpstreamEnvFile)
	}
	base, err := readValues(filepath.Join(p, ValuesFile))
	if err != nil {
		return f, err
	}
	cluster, err := readValues(filepath.Join(p, ClusterValuesFile))
	if err != nil {
		return f, err
	}
	f.Values = MergeValues(base, cluster)
	return f, nil
}

// readValues reads a values file: a YAML mapping, or empty.
func readValues(p string) (map[string]any, error) {
	raw, err := readLimited(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, layoutErr(p, "missing: every component folder holds %s and %s (either may be empty); AICR's install.sh passes both to helm", ValuesFile, ClusterValuesFile)
	}
	if err != nil {
		return nil, layoutErr(p, "unreadable: %v", err)
	}
	v, err := decodeYAMLMap(raw)
	if err != nil {
		return nil, layoutErr(p, "%v", err)
	}
	return v, nil
}

// upstreamKeys are the variables upstream.env sets.
var upstreamKeys = map[string]bool{"CHART": true, "REPO": true, "VERSION": true}

// readUpstreamEnv parses upstream.env: KEY=value lines, values bare or single-quoted the way
// AICR writes them ('it'\”s' for an embedded quote).
func readUpstreamEnv(p string) (Upstream, error) {
	raw, err := readLimited(p)
	if err != nil {
		return Upstream{}, layoutErr(p, "unreadable: %v", err)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !upstreamKeys[k] {
			return Upstream{}, layoutErr(p, "line %d %q: KEY=value lines with CHART, REPO and VERSION are accepted", n, line)
		}
		val, err := unquoteShell(v)
		if err != nil {
			return Upstream{}, layoutErr(p, "line %d: %v", n, err)
		}
		vars[k] = val
	}
	u := Upstream{Chart: vars["CHART"], Repo: vars["REPO"], Version: vars["VERSION"]}
	if u.Chart == "" || u.Version == "" || u.Name() == "" {
		return Upstream{}, layoutErr(p, "CHART and VERSION are required (CHART a chart name with REPO its repository, or a full oci:// reference)")
	}
	return u, nil
}

// unquoteShell undoes AICR's single quoting: 'a'\”b' is a'b; a bare word stays as it is.
func unquoteShell(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch s[i] {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", fmt.Errorf("unterminated single quote in %q", s)
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case '\\':
			if i+1 < len(s) {
				b.WriteByte(s[i+1])
			}
			i += 2
		case ' ', '\t', '$', '`', '"', ';', '&', '|':
			return "", fmt.Errorf("%q: a bare word or a single-quoted value is accepted", s)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// verifyChecksums checks every line of checksums.txt against the file it names; it returns
// how many it checked (0 when there is no checksums.txt).
func verifyChecksums(dir string) (int, error) {
	p := filepath.Join(dir, ChecksumsFile)
	raw, err := readLimited(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, layoutErr(p, "unreadable: %v", err)
	}
	n := 0
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		sum, rel, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || !filepath.IsLocal(rel) {
			return n, layoutErr(p, "line %d %q: \"<sha256 hex>  <path inside the bundle>\" is accepted (sha256sum's format)", i+1, line)
		}
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			return n, layoutErr(p, "line %d names %s, which cannot be read: %v", i+1, rel, errors.Unwrap(err))
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return n, layoutErr(filepath.Join(dir, rel), "read: %v", err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return n, layoutErr(filepath.Join(dir, rel), "checksum mismatch: %s says %s, the file is %s; the bundle changed after `aicr bundle` wrote it", ChecksumsFile, sum, got)
		}
		n++
	}
	return n, nil
}

func readLimited(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return raw, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
