package app

import "github.com/spf13/cobra"

// newBundleCmd is the bundle command group: bundles as OCI artifacts in the registry. Each
// subcommand lives in a file of its own (bundle_push.go).
func newBundleCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Bundles in the registry: push a bundle document as an OCI artifact pinned by digest",
		Long: `Bundles as OCI artifacts, in the registry the charts live in. A ClusterRuntime names one with
spec.bundle.oci (repository and digest); the planner pulls it with the repo-creds Secret's
credentials and verifies it against the digest. docs/bundle.md describes the artifact.`,
		Example: `  # Push a bundle and print the spec.bundle.oci to use
  kubectl aicr bundle push bundle.yaml --repository registry.example.com/aicr/bundles/gpu-stack`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
	}
	for _, sub := range []*cobra.Command{newBundlePushCmd(o)} {
		wrapRun(sub, o)
		cmd.AddCommand(sub)
	}
	return cmd
}
