package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/ociregistry"

	"github.com/aicr-run/aicr-operator/cli/internal/aicrbundle"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
	"github.com/aicr-run/aicr-operator/cli/internal/version"
)

// registryFlags are how a command reaches an OCI registry: plain http for a local one, and a
// login (the password from standard input, never a flag's value), else Docker's login for the
// registry (dockerCredentials).
type registryFlags struct {
	plainHTTP     bool
	username      string
	passwordStdin bool
}

func (r *registryFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&r.plainHTTP, "plain-http", false, "Talk http:// to the registry (a local registry; Argo CD then needs insecureOCIForceHttp)")
	f.StringVar(&r.username, "username", "", "Registry user name (ECR: AWS); when empty, Docker's login for the registry (config.json, credential helpers), else anonymous")
	f.BoolVar(&r.passwordStdin, "password-stdin", false, "Read the registry password (ECR: aws ecr get-login-password) from standard input")
}

func (r *registryFlags) client(stdin io.Reader, host string) (*ociregistry.Client, error) {
	creds := ociregistry.Credentials{Username: r.username}
	if r.passwordStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read the registry password from standard input: %w", err)
		}
		creds.Password = strings.TrimRight(line, "\r\n")
		if creds.Password == "" {
			return nil, usagef("--password-stdin: standard input held no password")
		}
	}
	if (creds.Username == "") != (creds.Password == "") {
		return nil, usagef("--username and --password-stdin go together (or neither, for Docker's login or none)")
	}
	if creds.Username == "" {
		var err error
		if creds, err = dockerCredentials(host); err != nil {
			return nil, err
		}
	}
	return ociregistry.New(ociregistry.Options{PlainHTTP: r.plainHTTP, Credentials: creds, UserAgent: Name + "/" + version.Get().Version}), nil
}

func newBundleCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Bundles: import the folder `aicr bundle` writes, push a bundle as an OCI artifact",
		Long: `Work with bundles outside the cluster. import turns the folder AICR's bundler writes (aicr bundle:
numbered NNN-<component>/ folders, bundle-info.yaml, checksums.txt) into this operator's bundle
document, with every chart pushed to (or found in) your registry and pinned by digest. push puts a
bundle document into the registry the charts live in as an OCI artifact; a ClusterRuntime names it
with spec.bundle.oci (repository and digest), and the planner pulls it with the repo-creds
Secret's credentials and verifies it against the digest. docs/bundle.md describes both.`,
		Example: `  # An AICR bundle into a bundle document, charts pinned in the registry
  kubectl aicr bundle import ./bundle --recipe ./bundle/recipe.yaml --registry registry.example.com/aicr -o bundle.yaml

  # Push a bundle and print the spec.bundle.oci to use
  kubectl aicr bundle push bundle.yaml --repository registry.example.com/aicr/bundles/gpu-stack`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
	}
	for _, sub := range []*cobra.Command{newBundleImportCmd(o), newBundlePushCmd(o)} {
		wrapRun(sub, o)
		cmd.AddCommand(sub)
	}
	return cmd
}

func newBundleImportCmd(o *options) *cobra.Command {
	var recipe, registry, mirrorFrom, outFile, name, bundleVersion string
	var reg registryFlags
	cmd := &cobra.Command{
		Use:   "import DIR --registry REPO [--recipe FILE] [--mirror-from DIR] [-o FILE]",
		Short: "Turn an AICR bundle folder into the operator's bundle, charts pinned by digest",
		Long: `Read the folder ` + "`aicr bundle`" + ` writes and print this operator's bundle document: one component per
numbered NNN-<component>/ folder (its release name), its namespace from bundle-info.yaml (else the
recipe), its values the folder's values.yaml merged with cluster-values.yaml (mappings merged key
by key, cluster-values.yaml winning; lists and other values replaced whole: helm's rule for
-f values.yaml -f cluster-values.yaml).

A folder with its own Chart.yaml is packaged (reproducibly: sorted entries, fixed times and owners)
and pushed to REPO/wrappers/<name>. A folder with upstream.env names an upstream chart, which must
be mirrored at REPO/charts/<chart>:<VERSION>; the import lists every one that is not, with the helm
commands that mirror it, and --mirror-from DIR pushes those it finds there (<chart>-<version>.tgz
as helm pull writes them, or chart folders). Every chart is pinned by the digest the registry
reports. checksums.txt, when present, is verified first.

Dependencies come from --recipe (the RecipeResult's componentRefs[].dependencyRefs), else the
folders form a chain in their numbered order. An NNN-<component>-readiness folder is AICR's
readiness gate for <component>. The same folder gives the same bundle, byte for byte, and the
same digests. The steps of a rollout from nothing are printed (to standard error when the bundle
goes to standard output). Load the bundle as a ConfigMap, preview it with kubectl aicr plan
--bundle, or push it with kubectl aicr bundle push.`,
		Example: `  # Import with the recipe's dependencies; upstream charts already mirrored
  kubectl aicr bundle import ./bundle --recipe ./bundle/recipe.yaml --registry registry.example.com/aicr -o bundle.yaml

  # Push the upstream charts found in a folder of helm pull'ed .tgz files as well
  kubectl aicr bundle import ./bundle --registry registry.example.com/aicr --mirror-from ./charts -o bundle.yaml

  # A local registry over http, with a login
  echo "$PASSWORD" | kubectl aicr bundle import ./bundle --registry 127.0.0.1:5000/aicr --plain-http \
    --username admin --password-stdin -o bundle.yaml

  # Then load it as the ClusterRuntime's bundle ConfigMap
  kubectl -n aicr-system create configmap gpu-stack --from-file=bundle.yaml=bundle.yaml`,
		Args: exactArgs(1, "the bundle folder"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if registry == "" {
				return usagef("--registry is required: registry.repository, the repository charts/ and wrappers/ live under (such as registry.example.com/aicr)")
			}
			repo, err := ociregistry.ParseRepository(registry)
			if err != nil {
				return usagef("--registry: %v", err)
			}
			client, err := reg.client(o.env.Stdin, repo.Host)
			if err != nil {
				return err
			}
			l, err := aicrbundle.Read(args[0])
			if err != nil {
				return err
			}
			opts := aicrbundle.Options{Name: name, Version: bundleVersion, Repository: repo, MirrorFrom: mirrorFrom, PlainHTTP: reg.plainHTTP}
			if recipe != "" {
				raw, err := preview.ReadFile("--recipe", recipe, o.env.Stdin)
				if err != nil {
					return err
				}
				if opts.Recipe, err = aicrbundle.ParseRecipe(recipe, raw); err != nil {
					return err
				}
			}
			res, err := aicrbundle.Import(cmd.Context(), l, client, opts)
			if err != nil {
				return err
			}
			pv, err := preview.Run(preview.Options{Bundle: res.Document})
			if err != nil {
				return fmt.Errorf("preview the imported bundle: %w", err)
			}
			report := o.env.Stdout
			if outFile == "" || outFile == "-" {
				report = o.env.Stderr
				if _, err := o.env.Stdout.Write(res.Document); err != nil {
					return err
				}
			} else if err := writeFileAtomic(outFile, res.Document); err != nil {
				return err
			}
			return writeImportReport(report, l, res, pv, outFile)
		},
	}
	f := cmd.Flags()
	f.StringVar(&registry, "registry", "", "registry.repository: the repository charts/ and wrappers/ live under, host[:port]/path (required)")
	f.StringVar(&recipe, "recipe", "", "The RecipeResult the bundle was built from (aicr writes recipe.yaml beside bundle-info.yaml); its dependencyRefs give the dependencies")
	f.StringVar(&mirrorFrom, "mirror-from", "", "A folder of upstream charts (<chart>-<version>.tgz or chart folders) to push when the registry lacks them")
	f.StringVarP(&outFile, "output", "o", "-", "Write the bundle to this file (- for standard output)")
	f.StringVar(&name, "name", aicrbundle.DefaultName, "The bundle's metadata.name")
	f.StringVar(&bundleVersion, "version", "", "The bundle's metadata.version (default: bundle-info.yaml's metadata.version, the aicr that wrote it)")
	reg.add(cmd)
	_ = cmd.MarkFlagDirname("mirror-from")
	_ = cmd.MarkFlagFilename("recipe", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("output", "yaml")
	return cmd
}

// writeImportReport prints what the import did: each chart and its digest, then the steps of a
// rollout from nothing, then how to use the bundle.
func writeImportReport(w io.Writer, l *aicrbundle.Layout, res *aicrbundle.Result, pv *preview.Result, outFile string) error {
	sums := "no checksums.txt"
	if l.Checked > 0 {
		sums = fmt.Sprintf("%d checksums verified", l.Checked)
	}
	fmt.Fprintf(w, "imported %s: %d components (%s)\n", l.Dir, len(res.Bundle.Components), sums)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range res.Charts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Component, c.Action, c.Ref, c.Digest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := preview.Write(w, pv, "text"); err != nil {
		return err
	}
	if outFile != "" && outFile != "-" {
		fmt.Fprintf(w, "wrote %s; load it with:\n  kubectl -n %s create configmap %s --from-file=%s=%s\n",
			outFile, v1alpha1.DefaultNamespace, res.Bundle.Metadata.Name, v1alpha1.DefaultBundleKey, outFile)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same folder, so a crash
// leaves the old file or the new one, never half of it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
