package aicrbundle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Registry is what the import needs of an OCI registry (*ociregistry.Client).
type Registry interface {
	Resolve(ctx context.Context, ref ociregistry.Reference) (ociregistry.Descriptor, error)
	PushArtifact(ctx context.Context, ref ociregistry.Reference, a ociregistry.Artifact) (ociregistry.Descriptor, error)
}

// DefaultName is the bundle's name when none is given: the name AICR gives its own stack.
const DefaultName = "aicr-stack"

// Options configure Import.
type Options struct {
	// Name and Version are the bundle's metadata; Version defaults to bundle-info.yaml's
	// metadata.version (the aicr that wrote the bundle), else the recipe's.
	Name, Version string
	// Recipe, when set, gives the dependencies (componentRefs[].dependencyRefs).
	Recipe *Recipe
	// Repository is registry.repository: charts/ and wrappers/ live under it.
	Repository ociregistry.Repository
	// MirrorFrom is a folder of packaged (.tgz) or unpacked charts; an upstream chart the
	// registry lacks is pushed from it when it is there.
	MirrorFrom string
	// PlainHTTP says the registry speaks http (for the mirror instructions).
	PlainHTTP bool
}

// ChartAction says how a chart got its digest.
type ChartAction string

// Chart actions.
const (
	ChartPushed   ChartAction = "pushed"   // a local chart, packaged and pushed to wrappers/
	ChartFound    ChartAction = "found"    // an upstream chart already under charts/
	ChartMirrored ChartAction = "mirrored" // an upstream chart pushed from --mirror-from
)

// ChartResult is one component's chart.
type ChartResult struct {
	Component string
	// Ref is where it is: <repository>/charts|wrappers/<name>:<tag>.
	Ref    string
	Digest string
	Action ChartAction
}

// Result is an import's outcome.
type Result struct {
	// Document is the bundle document (YAML), what a ConfigMap, `kubectl aicr plan --bundle`
	// and `kubectl aicr bundle push` take.
	Document []byte
	Bundle   *plan.Bundle
	Charts   []ChartResult
}

// Missing lists the upstream charts the registry lacks, each with how to mirror it.
type Missing struct {
	Charts []MissingChart
}

// MissingChart is an upstream chart the registry lacks.
type MissingChart struct {
	Folder   string // the folder's upstream.env
	Ref      string // where the operator expects it
	Upstream Upstream
	Mirror   string // the commands that mirror it
}

func (m *Missing) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d upstream chart(s) are not mirrored in the registry; the operator pulls charts only from registry.repository:", len(m.Charts))
	for _, c := range m.Charts {
		fmt.Fprintf(&b, "\n  %s: missing %s (CHART=%s REPO=%s VERSION=%s)\n    mirror it:  %s", c.Folder, c.Ref, c.Upstream.Chart, c.Upstream.Repo, c.Upstream.Version, c.Mirror)
	}
	b.WriteString("\nor put the packaged charts (helm pull writes <chart>-<version>.tgz) or their folders in one folder and pass --mirror-from FOLDER")
	return b.String()
}

// Import turns the read layout into a bundle: it plans the dependencies, packages and pushes
// every local chart to wrappers/<name>, finds every upstream chart under charts/<chart> (pushing
// it from MirrorFrom when the registry lacks it) and pins each by the digest the registry
// reports. It fails with *Missing when upstream charts are not mirrored, naming all of them.
func Import(ctx context.Context, l *Layout, reg Registry, o Options) (*Result, error) {
	planned, err := Plan(l, o.Recipe)
	if err != nil {
		return nil, err
	}
	version := o.Version
	if version == "" {
		version = l.Info.Metadata.Version
	}
	if version == "" && o.Recipe != nil {
		version = o.Recipe.Metadata.Version
	}
	if version == "" {
		return nil, layoutErr(filepath.Join(l.Dir, BundleInfoFile), "metadata.version is empty and no recipe gives one: name the bundle's version with --version")
	}
	var mirror map[string]Chart
	if o.MirrorFrom != "" {
		if mirror, err = ReadMirror(o.MirrorFrom); err != nil {
			return nil, err
		}
	}
	res := &Result{Bundle: &plan.Bundle{APIVersion: plan.BundleAPIVersion, Kind: plan.BundleKind, Metadata: plan.BundleMeta{Name: cmp.Or(o.Name, DefaultName), Version: version}}}
	for _, p := range planned {
		f := p.Folder
		path := plan.WrappersPrefix + f.Name
		if f.Kind == KindUpstream {
			path = plan.ChartsPrefix + f.Upstream.Name()
		}
		values, err := json.Marshal(f.Values)
		if err != nil {
			return nil, fmt.Errorf("%s: encode values: %w", f.Path, err)
		}
		res.Bundle.Components = append(res.Bundle.Components, plan.Component{
			Name: f.Name, Chart: plan.ChartRef{Path: path, Digest: placeholderDigest}, Namespace: p.Namespace,
			DependsOn: p.DependsOn, ReadinessGate: p.ReadinessGate, Values: values,
		})
	}
	// Everything the operator would refuse is refused before anything is pushed.
	if err := res.Bundle.Validate(); err != nil {
		return nil, folderError(l, err)
	}
	if _, err := plan.Resolve(res.Bundle, plan.Inputs{}); err != nil {
		return nil, folderError(l, err)
	}
	missing := &Missing{}
	for i, p := range planned {
		f := p.Folder
		c := &res.Bundle.Components[i]
		var cr ChartResult
		switch f.Kind {
		case KindLocalChart:
			ch, err := PackageChart(f.Path)
			if err != nil {
				return nil, err
			}
			ref := o.ref(c.Chart.Path, ch.Version)
			desc, err := reg.PushArtifact(ctx, ref, ch.Artifact())
			if err != nil {
				return nil, fmt.Errorf("%s: push the chart to %s: %w", f.Path, ref, err)
			}
			cr = ChartResult{Component: f.Name, Ref: ref.String(), Digest: desc.Digest, Action: ChartPushed}
		case KindUpstream:
			u := *f.Upstream
			ref := o.ref(c.Chart.Path, u.Version)
			desc, err := reg.Resolve(ctx, ref)
			action := ChartFound
			if errors.Is(err, ociregistry.ErrNotFound) {
				ch, ok := mirror[u.Name()+"@"+u.Version]
				if !ok {
					missing.Charts = append(missing.Charts, MissingChart{
						Folder: filepath.Join(f.Path, UpstreamEnvFile), Ref: ref.String(), Upstream: u, Mirror: o.mirrorCommand(u),
					})
					continue
				}
				action = ChartMirrored
				desc, err = reg.PushArtifact(ctx, ref, ch.Artifact())
			}
			if err != nil {
				return nil, fmt.Errorf("%s: find the chart %s: %w", filepath.Join(f.Path, UpstreamEnvFile), ref, err)
			}
			cr = ChartResult{Component: f.Name, Ref: ref.String(), Digest: desc.Digest, Action: action}
		}
		if ociregistry.ValidateDigest(cr.Digest) != nil {
			return nil, fmt.Errorf("%s: the registry reported %q for %s, not a sha256 manifest digest", f.Path, cr.Digest, cr.Ref)
		}
		c.Chart.Digest = cr.Digest
		res.Charts = append(res.Charts, cr)
	}
	if len(missing.Charts) > 0 {
		return nil, missing
	}
	if res.Document, err = yaml.Marshal(res.Bundle); err != nil {
		return nil, fmt.Errorf("encode the bundle: %w", err)
	}
	return res, nil
}

// placeholderDigest stands for the charts' digests while the bundle is checked, before anything
// is pushed.
var placeholderDigest = "sha256:" + strings.Repeat("0", 64)

// folderError names the folder a bundle validation error is about (components[i] is folder i).
func folderError(l *Layout, err error) error {
	var pe *plan.Error
	if errors.As(err, &pe) && strings.HasPrefix(pe.Field, "components[") {
		var i int
		if _, serr := fmt.Sscanf(pe.Field, "components[%d]", &i); serr == nil && i < len(l.Folders) {
			return fmt.Errorf("%s: the operator refuses it: %w", l.Folders[i].Path, err)
		}
	}
	return fmt.Errorf("the operator refuses the bundle: %w", err)
}

func (o Options) ref(path, version string) ociregistry.Reference {
	return ociregistry.Reference{Repository: ociregistry.Repository{Host: o.Repository.Host, Name: o.Repository.Name + "/" + path}, Tag: Tag(version)}
}

// mirrorCommand is how a person copies an upstream chart into registry.repository/charts.
func (o Options) mirrorCommand(u Upstream) string {
	dest := "oci://" + o.Repository.String() + "/charts"
	flag := ""
	if o.PlainHTTP {
		flag = " --plain-http"
	}
	pull := fmt.Sprintf("helm pull %s --version %s", u.Chart, u.Version)
	if u.Repo != "" && !strings.HasPrefix(u.Chart, "oci://") {
		pull = fmt.Sprintf("helm pull %s --repo %s --version %s", u.Chart, u.Repo, u.Version)
	}
	return fmt.Sprintf("%s && helm push %s-%s.tgz %s%s", pull, u.Name(), u.Version, dest, flag)
}

// ReadMirror reads a --mirror-from folder: each packaged chart (*.tgz) and each chart folder (a
// folder holding Chart.yaml, packaged as PackageChart does), by <name>@<version>.
func ReadMirror(dir string) (map[string]Chart, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, layoutErr(dir, "cannot read the --mirror-from folder: %v", err)
	}
	out := map[string]Chart{}
	from := map[string]string{}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		var ch Chart
		switch {
		case strings.HasSuffix(n, ".tgz"):
			if ch, err = ReadArchive(p); err != nil {
				return nil, err
			}
		case exists(filepath.Join(p, ChartFile)):
			if ch, err = PackageChart(p); err != nil {
				return nil, err
			}
		default:
			continue
		}
		key := ch.Name + "@" + ch.Version
		if prev, dup := from[key]; dup {
			return nil, layoutErr(p, "chart %s %s is also %s; the --mirror-from folder holds each chart version once", ch.Name, ch.Version, prev)
		}
		out[key], from[key] = ch, p
	}
	return out, nil
}
