package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/graph"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// graphFormats are the picture formats graph and plan add to -o.
var graphFormats = []string{"dot", "mermaid"}

// graphDoc prints a graph: the layered text, dot, mermaid, or its nodes and edges as data.
func graphDoc(g *graph.Graph, names []string, st style.Style) output.Doc {
	return output.Doc{
		Object: g,
		Names:  names,
		Text:   func(w io.Writer) error { return graph.Text(w, g, st) },
		Formats: map[string]func(io.Writer) error{
			"dot":     func(w io.Writer) error { return graph.Dot(w, g) },
			"mermaid": func(w io.Writer) error { return graph.Mermaid(w, g) },
		},
	}
}

func newGraphCmd(o *options) *cobra.Command {
	var file, bundle, runtimeFile string
	out := output.NewFlags(graphFormats...)
	cmd := &cobra.Command{
		Use:   "graph [ROLLOUT]",
		Short: "Draw a rollout's dependency graph with each release's step and state",
		Long: `Draw the dependency DAG of a rollout (the runtime's current one when no name is given): every
release of the plan it moves to, in layers (a release comes after everything it depends on), each
with its step (index and action) and state, the releases without a step as unchanged, and the
Remove steps of the releases that leave.

The default text draws the layers top-down with arrows, coloured by state on a terminal. -o dot
is Graphviz's language (dot -Tpng renders it), -o mermaid a Mermaid flowchart (GitHub renders it
in Markdown); -o json|yaml give the nodes, their layers and the edges. When the plan cannot be read
(its ConfigMap is in the operator namespace), the graph is drawn from the steps alone.

With -f the rollout is read from a file (as kubectl get runtimerollout NAME -o yaml writes it)
and no cluster is needed; --bundle (with --runtime for its overrides and placement) then gives
the plan's dependencies, else the steps alone are drawn.`,
		Example: `  # The current rollout, on the terminal
  kubectl aicr graph

  # A picture
  kubectl aicr graph r-172ca57c59-none -o dot | dot -Tpng -o rollout.png

  # For a Markdown page
  kubectl aicr graph -o mermaid

  # From a saved rollout, without a cluster
  kubectl get runtimerollout r-172ca57c59-none -o yaml > rollout.yaml
  kubectl aicr graph -f rollout.yaml --bundle examples/bundle.yaml -o dot`,
		Args:              maxArgs(1, "one rollout name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.Validate(); err != nil {
				return err
			}
			if file != "" {
				if len(args) > 0 {
					return usagef("give a rollout name or -f, not both")
				}
				return o.graphFromFile(file, bundle, runtimeFile, out)
			}
			if bundle != "" || runtimeFile != "" {
				return usagef("--bundle and --runtime go with -f; from the cluster the plan is read from its ConfigMap")
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ro, err := kc.CurrentRollout(ctx, first(args))
			if err != nil {
				return err
			}
			title := "rollout " + ro.Name
			var g *graph.Graph
			if ro.Spec.ToDigest == "" {
				g = graph.FromSteps(title, ro.Status.Steps)
			} else if p, _, err := kc.Plan(ctx, ro.Spec.ToDigest); err != nil {
				fmt.Fprintf(o.env.Stderr, "warning: %s; drawing the rollout's steps only\n", strings.TrimSpace(err.Error()))
				g = graph.FromSteps(title, ro.Status.Steps)
			} else {
				g = graph.FromPlan(title, p, ro.Status.Steps)
			}
			return out.Print(o.env.Stdout, graphDoc(g, []string{output.Name(ro.Raw())}, o.style(o.env.Stdout)))
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "Read the rollout from this file (YAML or JSON; - for standard input) instead of the cluster")
	cmd.Flags().StringVar(&bundle, "bundle", "", "With -f: the bundle file the rollout's plan was resolved from")
	cmd.Flags().StringVar(&runtimeFile, "runtime", "", "With -f and --bundle: the ClusterRuntime file whose overrides and placement apply")
	for _, name := range []string{"filename", "bundle", "runtime"} {
		_ = cmd.MarkFlagFilename(name, "yaml", "yml", "json")
	}
	out.AddFlags(cmd)
	return cmd
}

// graphFromFile draws a saved rollout; a bundle gives the plan's dependencies.
func (o *options) graphFromFile(file, bundle, runtimeFile string, out *output.Flags) error {
	data, err := preview.ReadFile("-f", file, o.env.Stdin)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return fmt.Errorf("-f %s: not YAML or JSON: %w", file, err)
	}
	if u.GetKind() != "RuntimeRollout" {
		return fmt.Errorf("-f %s: kind %q; a RuntimeRollout is expected (kubectl get runtimerollout NAME -o yaml)", file, u.GetKind())
	}
	ro := &v1alpha1.RuntimeRollout{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ro); err != nil {
		return fmt.Errorf("-f %s: read runtimerollout %s: %w", file, u.GetName(), err)
	}
	title := "rollout " + ro.Name
	g := graph.FromSteps(title, ro.Status.Steps)
	if bundle != "" {
		opts := preview.Options{}
		if opts.Bundle, err = preview.ReadFile("--bundle", bundle, o.env.Stdin); err != nil {
			return err
		}
		if runtimeFile != "" {
			if opts.Runtime, err = preview.ReadFile("--runtime", runtimeFile, o.env.Stdin); err != nil {
				return err
			}
		}
		in, err := preview.Inputs(opts.Runtime)
		if err != nil {
			return err
		}
		p, err := preview.Resolve("--bundle", opts.Bundle, in)
		if err != nil {
			return err
		}
		if p.Digest() != ro.Spec.ToDigest {
			fmt.Fprintf(o.env.Stderr, "warning: --bundle resolves to %s, the rollout moves to %s: the graph shows the bundle's dependencies\n", p.Digest(), orDash(ro.Spec.ToDigest))
		}
		g = graph.FromPlan(title, p, ro.Status.Steps)
	} else if runtimeFile != "" {
		return usagef("--runtime goes with --bundle")
	}
	return out.Print(o.env.Stdout, graphDoc(g, []string{output.Name(u)}, o.style(o.env.Stdout)))
}
