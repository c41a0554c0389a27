package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
)

// pushed is what bundle push prints.
type pushed struct {
	Repository string          `json:"repository"`
	Tag        string          `json:"tag"`
	Digest     string          `json:"digest"`
	Bundle     plan.BundleMeta `json:"bundle"`
}

func newBundlePushCmd(o *options) *cobra.Command {
	var repository, username string
	var passwordStdin, plainHTTP bool
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "push FILE --repository REPO[:TAG] [--username NAME --password-stdin] [--plain-http]",
		Short: "Push a bundle document to a registry as an OCI artifact and print its digest",
		Long: `Push a bundle document (the YAML a bundle ConfigMap holds, docs/bundle.md) to an OCI registry as the
operator's bundle artifact: an OCI image manifest with artifactType application/vnd.aicr-run.bundle.v1,
the empty config, and one layer of application/vnd.aicr-run.bundle.layer.v1+yaml holding the document.
The bundle is checked first, as the planner reads it. Print the manifest digest and the
spec.bundle.oci to put on the ClusterRuntime: changing that digest moves the stack to this bundle.

The tag is REPO's :TAG, else the bundle's metadata.version ('+' written as '_', as Helm does). The
same document gives the same digest on every push. Push into the registry the charts live in,
under registry.repository: the planner sends the repo-creds Secret's credentials only there.

Credentials: --username and the password (or token) on standard input with --password-stdin, as
for helm registry login; for ECR, the username AWS and the output of aws ecr get-login-password.
Without them the push is anonymous. --plain-http talks HTTP to a local registry.`,
		Example: `  # Push, tagged with the bundle's version
  kubectl aicr bundle push bundle.yaml --repository registry.example.com/aicr/bundles/gpu-stack

  # To ECR
  aws ecr get-login-password | kubectl aicr bundle push bundle.yaml \
    --repository 123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr/bundles/gpu-stack:1.2.0 \
    --username AWS --password-stdin

  # Just the digest
  kubectl aicr bundle push bundle.yaml --repository 127.0.0.1:5000/aicr/bundles/gpu-stack --plain-http -o jsonpath='{.digest}'`,
		Args: exactArgs(1, "the bundle file (- for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.Validate(); err != nil {
				return err
			}
			if repository == "" {
				return usagef("--repository is required: the repository to push to, host[:port]/path[:tag], such as registry.example.com/aicr/bundles/gpu-stack")
			}
			ref, err := ociregistry.ParseReference(repository)
			if err != nil {
				return usagef("--repository: %v", err)
			}
			if ref.Digest != "" {
				return usagef("--repository %q: a tag may be given, not a digest (the digest is the push's result)", repository)
			}
			if passwordStdin && args[0] == "-" {
				return usagef("--password-stdin and FILE - both read standard input: give the bundle as a file")
			}
			if passwordStdin != (username != "") {
				return usagef("--username and --password-stdin go together: give both, or neither for an anonymous push")
			}
			data, err := preview.ReadFile("FILE", args[0], o.env.Stdin)
			if err != nil {
				return err
			}
			p, err := preview.Resolve(args[0], data, plan.Inputs{})
			if err != nil {
				return err
			}
			if ref.Tag == "" {
				ref.Tag = strings.ReplaceAll(p.Bundle.Version, "+", "_")
				if _, err := ociregistry.ParseReference(ref.Repository.String() + ":" + ref.Tag); err != nil {
					return usagef("the bundle's version %q is not a tag: give one in --repository REPO:TAG", p.Bundle.Version)
				}
			}
			creds := ociregistry.Credentials{Username: username}
			if passwordStdin {
				pw, err := io.ReadAll(io.LimitReader(o.env.Stdin, 64<<10))
				if err != nil {
					return fmt.Errorf("read the password from standard input: %w", err)
				}
				creds.Password = strings.TrimRight(string(pw), "\r\n")
			} else if creds, err = dockerCredentials(ref.Repository.Host); err != nil {
				return err
			}
			client := ociregistry.New(ociregistry.Options{PlainHTTP: plainHTTP, Credentials: creds, UserAgent: Name})
			desc, err := client.PushArtifact(cmd.Context(), ref, ociregistry.BundleArtifact(data))
			if err != nil {
				return err
			}
			res := pushed{Repository: ref.Repository.String(), Tag: ref.Tag, Digest: desc.Digest, Bundle: p.Bundle}
			return out.Print(o.env.Stdout, output.Doc{
				Object: res,
				Names:  []string{res.Repository + "@" + res.Digest},
				Text:   func(w io.Writer) error { return writePushed(w, res) },
			})
		},
	}
	cmd.Flags().StringVar(&repository, "repository", "", "The repository to push to, host[:port]/path with an optional :TAG")
	cmd.Flags().StringVar(&username, "username", "", "The registry username (AWS for ECR); the password comes from --password-stdin. Without it, Docker's login for the registry (config.json, credential helpers), else anonymous")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "Read the registry password or token from standard input")
	cmd.Flags().BoolVar(&plainHTTP, "plain-http", false, "Talk HTTP, not HTTPS, to the registry (a local registry)")
	out.AddFlags(cmd)
	return cmd
}

func writePushed(w io.Writer, r pushed) error {
	_, err := fmt.Fprintf(w, `pushed bundle %s %s to %s:%s
digest: %s

Put this on the ClusterRuntime (kubectl edit clusterruntime cluster):

spec:
  bundle:
    oci:
      repository: %s
      digest: %s
`, r.Bundle.Name, r.Bundle.Version, r.Repository, r.Tag, r.Digest, r.Repository, r.Digest)
	return err
}
