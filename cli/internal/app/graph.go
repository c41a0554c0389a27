package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aicr-run/aicr-operator/cli/internal/graph"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
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
(its ConfigMap is in the operator namespace), the graph is drawn from the steps alone.`,
		Example: `  # The current rollout, on the terminal
  kubectl aicr graph

  # A picture
  kubectl aicr graph r-172ca57c59-none -o dot | dot -Tpng -o rollout.png

  # For a Markdown page
  kubectl aicr graph -o mermaid`,
		Args:              maxArgs(1, "one rollout name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.Validate(); err != nil {
				return err
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
			return out.Print(o.env.Stdout, graphDoc(g, []string{output.Name(ro.Raw)}, o.style(o.env.Stdout)))
		},
	}
	out.AddFlags(cmd)
	return cmd
}
