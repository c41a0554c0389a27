package aicrbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
)

// Chart is a packaged Helm chart: its name and version from Chart.yaml, Chart.yaml as JSON (the
// OCI config) and the .tgz.
type Chart struct {
	Name, Version string
	Config        []byte
	Archive       []byte
}

// Artifact is the chart in Helm's OCI layout, annotated with its name and version.
func (c Chart) Artifact() ociregistry.Artifact {
	return ociregistry.ChartArtifact(c.Config, c.Archive, map[string]string{
		ociregistry.AnnotationTitle: c.Name, ociregistry.AnnotationVersion: c.Version,
	})
}

// Tag is the registry tag helm pushes a chart version under: '+' is not allowed in a tag, so
// helm writes '_' (and reads it back).
func Tag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// notPackaged are the files of an AICR folder that are not part of its chart: the install
// scripts, the upstream reference and the per-cluster values (the bundle carries the merged
// values; the chart keeps values.yaml as its defaults).
var notPackaged = map[string]bool{
	"install.sh": true, "apply-crds.sh": true, UpstreamEnvFile: true, ClusterValuesFile: true, "application.yaml": true,
}

// epoch is every packaged file's modification time: packaging must not depend on when or where
// the folder was written.
var epoch = time.Unix(0, 0).UTC()

// PackageChart packages the chart folder dir the way `helm package` lays a chart out (every file
// under <name>/), but reproducibly: entries in sorted path order, mode 0644 (0755 for files that
// were executable), owner 0:0 without names, the same modification time, no gzip name or time.
// The same folder gives the same bytes on any machine.
func PackageChart(dir string) (Chart, error) {
	meta, config, err := chartMeta(filepath.Join(dir, ChartFile))
	if err != nil {
		return Chart{}, err
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return nil
		}
		if rel == filepath.Base(rel) && notPackaged[rel] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return layoutErr(p, "not a regular file (%s): a chart folder holds files and folders only", info.Mode().Type())
		}
		mode := int64(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: meta.Name + "/" + filepath.ToSlash(rel), Mode: mode, Size: info.Size(),
			ModTime: epoch, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return Chart{}, fmt.Errorf("package chart %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return Chart{}, fmt.Errorf("package chart %s: %w", dir, err)
	}
	if err := gz.Close(); err != nil {
		return Chart{}, fmt.Errorf("package chart %s: %w", dir, err)
	}
	return Chart{Name: meta.Name, Version: meta.Version, Config: config, Archive: buf.Bytes()}, nil
}

type chartMetadata struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// chartMeta reads Chart.yaml: its name and version (both required) and the whole file as JSON,
// keys sorted.
func chartMeta(p string) (chartMetadata, []byte, error) {
	raw, err := readLimited(p)
	if err != nil {
		return chartMetadata{}, nil, layoutErr(p, "unreadable: %v", err)
	}
	return parseChartMeta(p, raw)
}

func parseChartMeta(p string, raw []byte) (chartMetadata, []byte, error) {
	var meta chartMetadata
	m, err := decodeYAMLMap(raw)
	if err == nil {
		err = yaml.Unmarshal(raw, &meta)
	}
	if err != nil {
		return meta, nil, layoutErr(p, "not a Chart.yaml: %v", err)
	}
	if meta.Name == "" || meta.Version == "" || !nameRE.MatchString(meta.Name) {
		return meta, nil, layoutErr(p, "name %q, version %q: a chart name (lowercase DNS-1123 label) and a version are required", meta.Name, meta.Version)
	}
	js, err := json.Marshal(m)
	if err != nil {
		return meta, nil, layoutErr(p, "encode as JSON: %v", err)
	}
	return meta, js, nil
}

// ReadArchive reads a packaged chart (.tgz, as helm package or helm pull write it): its
// Chart.yaml, the first <name>/Chart.yaml entry.
func ReadArchive(p string) (Chart, error) {
	raw, err := readLimited(p)
	if err != nil {
		return Chart{}, layoutErr(p, "unreadable: %v", err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return Chart{}, layoutErr(p, "not a packaged chart (.tgz): %v", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return Chart{}, layoutErr(p, "no <chart>/Chart.yaml inside: not a packaged Helm chart")
		}
		if err != nil {
			return Chart{}, layoutErr(p, "not a packaged chart (.tgz): %v", err)
		}
		parts := strings.Split(strings.TrimPrefix(hdr.Name, "./"), "/")
		if len(parts) != 2 || parts[1] != ChartFile {
			continue
		}
		meta, err := io.ReadAll(io.LimitReader(tr, maxFileBytes))
		if err != nil {
			return Chart{}, layoutErr(p, "read %s: %v", hdr.Name, err)
		}
		m, config, err := parseChartMeta(p+"!"+hdr.Name, meta)
		if err != nil {
			return Chart{}, err
		}
		return Chart{Name: m.Name, Version: m.Version, Config: config, Archive: raw}, nil
	}
}
