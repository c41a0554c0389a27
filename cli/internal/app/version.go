package app

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/version"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// versionInfo is what version prints.
type versionInfo struct {
	Plugin version.Info `json:"plugin"`
	// Operator is absent with --client.
	Operator *operatorVersion `json:"operator,omitempty"`
	// Kubernetes is the API server's version (absent with --client or when unreachable).
	Kubernetes string `json:"kubernetes,omitempty"`
}

type operatorVersion struct {
	// Version is the operator's version: the running planner's (Running), else the
	// app.kubernetes.io/version label its Helm chart puts on each Deployment (else the image
	// tag); "mixed" when the Deployments disagree, "unknown" when none is found or they cannot
	// be read.
	Version string `json:"version"`
	// Running is the build of the planner that last wrote the ClusterRuntime's status
	// (status.operator), as the binary itself reports it.
	Running *v1alpha1.OperatorBuild `json:"running,omitempty"`
	// Namespace is where the Deployments were looked for.
	Namespace string `json:"namespace"`
	// Components are the Deployments found.
	Components []kube.Component `json:"components,omitempty"`
	// Error says why the version is unknown.
	Error string `json:"error,omitempty"`
}

func newVersionCmd(o *options) *cobra.Command {
	var client bool
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The plugin's version and, when reachable, the operator's and the API server's",
		Long: `Print the plugin's version (stamped by make build, make plugin and make release; "dev" for other builds) and, unless
--client, the operator's and the Kubernetes API server's.

The operator's version is what the running planner reports of its own build in the
ClusterRuntime's status (status.operator: the version and commit stamped into the binary, also in
each binary's aicr_build_info metric). The Deployments in the operator namespace (-n, default
aicr-system) labelled app.kubernetes.io/part-of=aicr-operator, as the Helm chart labels them, are
listed with their app.kubernetes.io/version label (the chart's appVersion), else their image's
tag, which also give the version before the planner has written the status. When neither can be
read, the version is "unknown" with the reason, and the command still succeeds.`,
		Example: `  kubectl aicr version
  kubectl aicr version --client
  kubectl aicr version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Validate(); err != nil {
				return err
			}
			info := versionInfo{Plugin: version.Get()}
			if !client {
				info.Operator, info.Kubernetes = o.serverVersions(cmd.Context())
			}
			return out.Print(o.env.Stdout, output.Doc{
				Object: info,
				Names:  []string{"plugin/" + info.Plugin.Version},
				Text:   func(w io.Writer) error { return writeVersion(w, info) },
			})
		},
	}
	cmd.Flags().BoolVar(&client, "client", false, "Print the plugin's version only (no cluster)")
	out.AddFlags(cmd)
	return cmd
}

func (o *options) serverVersions(ctx context.Context) (*operatorVersion, string) {
	ns, _ := o.namespace()
	op := &operatorVersion{Version: "unknown", Namespace: ns}
	kc, err := o.client()
	if err != nil {
		op.Error = err.Error()
		return op, ""
	}
	kubeVersion := ""
	if sv, err := kc.Kube.Discovery().ServerVersion(); err == nil {
		kubeVersion = sv.GitVersion
	}
	comps, err := kc.OperatorComponents(ctx)
	switch {
	case err != nil:
		op.Error = err.Error()
	case len(comps) == 0:
		op.Error = fmt.Sprintf("no Deployment labelled %s=%s in %s", kube.LabelPartOf, kube.PartOfOperator, ns)
	default:
		op.Components = comps
		op.Version = comps[0].Version
		for _, c := range comps {
			if c.Version != op.Version {
				op.Version = "mixed"
			}
		}
		if op.Version == "" {
			op.Version = "unknown"
			op.Error = "the Deployments carry no version label and their images no tag"
		}
	}
	// What the running planner says of itself beats what the Deployments were labelled with.
	if rt, err := kc.Runtime(ctx); err == nil && rt.Status.Operator != nil {
		op.Running = rt.Status.Operator.DeepCopy()
		op.Version, op.Error = op.Running.Version, ""
	}
	return op, kubeVersion
}

func writeVersion(w io.Writer, v versionInfo) error {
	var b strings.Builder
	p := v.Plugin
	fmt.Fprintf(&b, "Plugin:     %s", p.Version)
	if p.Commit != "" {
		fmt.Fprintf(&b, " (commit %s)", p.Commit)
	}
	fmt.Fprintf(&b, ", %s, %s\n", p.GoVersion, p.Platform)
	if op := v.Operator; op != nil {
		fmt.Fprintf(&b, "Operator:   %s", op.Version)
		switch {
		case op.Error != "":
			fmt.Fprintf(&b, " (%s)", op.Error)
		case op.Running != nil:
			fmt.Fprintf(&b, " (commit %s, the running planner's; namespace %s)", op.Running.Revision, op.Namespace)
		default:
			fmt.Fprintf(&b, " (namespace %s)", op.Namespace)
		}
		b.WriteString("\n")
		for _, c := range op.Components {
			fmt.Fprintf(&b, "  %-14s %-10s %s ready, %s\n", c.Name, c.Version, c.Ready, c.Image)
		}
		k := v.Kubernetes
		if k == "" {
			k = "unknown (not reachable)"
		}
		fmt.Fprintf(&b, "Kubernetes: %s\n", k)
	}
	_, err := io.WriteString(w, escapeKeepLines(b.String()))
	return err
}
