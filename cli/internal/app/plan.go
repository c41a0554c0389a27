package app

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/graph"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
	"github.com/aicr-run/aicr-operator/cli/internal/reproduce"
)

func newPlanCmd(o *options) *cobra.Command {
	var bundle, from, runtimeFile, repo, engineNS, project, uid string
	var apps, drawGraph bool
	out := output.NewFlags(graphFormats...)
	cmd := &cobra.Command{
		Use:   "plan --bundle FILE [--from FILE] [--runtime FILE] [--applications] [--graph]",
		Short: "Without a cluster: the plan digest, steps, Applications and graph a bundle gives",
		Long: `Resolve a bundle as the planner does, without a cluster: the plan's digest (the planner computes the
same one from the same bundle and ClusterRuntime spec), the steps a rollout from nothing (or from
the --from bundle) would take, and with --applications every Application exactly as the applier
writes it (shared/appspec, the builder both use).

--graph draws the plan's dependency DAG with each release's step instead (text on a terminal,
-o dot or -o mermaid for a picture; dot and mermaid always draw the graph).`,
		Example: `  # The digest and the steps
  kubectl aicr plan --bundle examples/bundle.yaml --runtime examples/clusterruntime.yaml

  # What a bundle change would do
  kubectl aicr plan --bundle new.yaml --from old.yaml

  # The Applications, as written
  kubectl aicr plan --bundle new.yaml --applications -o yaml

  # The graph as a picture
  kubectl aicr plan --bundle examples/bundle.yaml --graph -o dot | dot -Tpng -o plan.png`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bundle == "" {
				return usagef("--bundle is required: the bundle file to resolve (- for standard input)")
			}
			if err := out.Validate(); err != nil {
				return err
			}
			opts := preview.Options{
				Applications: apps,
				Settings:     appspec.Settings{EngineNamespace: engineNS, Project: project, Repository: repo},
				RuntimeUID:   uid,
			}
			var err error
			if opts.Bundle, err = preview.ReadFile("--bundle", bundle, o.env.Stdin); err != nil {
				return err
			}
			if from != "" {
				if opts.From, err = preview.ReadFile("--from", from, o.env.Stdin); err != nil {
					return err
				}
			}
			if runtimeFile != "" {
				if opts.Runtime, err = preview.ReadFile("--runtime", runtimeFile, o.env.Stdin); err != nil {
					return err
				}
			}
			res, err := preview.Run(opts)
			if err != nil {
				return err
			}
			names := []string{"configmap/" + plan.ConfigMapName(res.Digest)}
			for _, a := range res.Applications {
				if meta, ok := a["metadata"].(map[string]any); ok {
					names = append(names, fmt.Sprintf("application.argoproj.io/%v", meta["name"]))
				}
			}
			g := planGraph(res)
			doc := graphDoc(g, names, o.style(o.env.Stdout))
			if !drawGraph {
				doc.Object = res
				doc.Text = textOf(func(w io.Writer) error { return preview.Write(w, res, "text") })
			}
			return out.Print(o.env.Stdout, doc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&bundle, "bundle", "", "The bundle file (required; - for standard input)")
	f.StringVar(&from, "from", "", "An earlier bundle file the stack is at (default: nothing installed)")
	f.StringVar(&runtimeFile, "runtime", "", "A ClusterRuntime file whose overrides and placement apply")
	f.BoolVar(&apps, "applications", false, "Also print the Applications exactly as the applier writes them")
	f.BoolVar(&drawGraph, "graph", false, "Draw the plan's dependency graph with each release's step")
	f.StringVar(&repo, "registry-repository", DefaultRegistryRepository, "registry.repository: where charts/ and wrappers/ live")
	f.StringVar(&engineNS, "engine-namespace", v1alpha1.DefaultEngineNamespace, "engine.namespace: the Argo CD namespace")
	f.StringVar(&project, "engine-project", appspec.DefaultProject, "engine.project: the AppProject")
	f.StringVar(&uid, "runtime-uid", "", "The ClusterRuntime's UID for the ownership annotation (kubectl get clusterruntime cluster -o jsonpath='{.metadata.uid}')")
	for _, name := range []string{"bundle", "from", "runtime"} {
		_ = cmd.MarkFlagFilename(name, "yaml", "yml", "json")
	}
	out.AddFlags(cmd)
	return cmd
}

// planGraph draws what a preview would do: the plan's releases with the steps from --from.
func planGraph(res *preview.Result) *graph.Graph {
	title := fmt.Sprintf("plan %s (bundle %s %s)", shortDigest(res.Digest), res.Bundle.Name, res.Bundle.Version)
	if res.FromDigest != "" {
		title += " from " + shortDigest(res.FromDigest)
	}
	return graph.FromPlan(title, res.Plan, res.Steps)
}

// shortDigest is "sha256:" and the first 12 hex digits.
func shortDigest(d string) string {
	if hex := strings.TrimPrefix(d, "sha256:"); len(hex) > 12 {
		return "sha256:" + hex[:12]
	}
	return d
}

func newReproduceCmd(o *options) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "reproduce [PLAN] [--dir DIR]",
		Short: "Write a plan's inputs (plan, bundle, runtime spec) so anyone can re-derive it",
		Long: `Write out a stored plan (the runtime's active plan when none is named; a digest or a ConfigMap
name) with the bundle and the ClusterRuntime spec it came from, and check that they re-derive its
digest: plan.json (its canonical JSON: sha256sum plan.json is the digest), bundle.yaml,
clusterruntime.yaml and a README. It fails when the current bundle or spec no longer give the
plan (they changed after it was made); plan.json is then the plan as it was.`,
		Example: `  # The active plan's inputs, into ./plan-<12 hex digits>
  kubectl aicr reproduce

  # A given plan, into a folder
  kubectl aicr reproduce sha256:172ca57c59e9... --dir plan-inputs`,
		Args:              maxArgs(1, "one plan digest or ConfigMap name"),
		ValidArgsFunction: planDigests(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := kc.Runtime(ctx)
			if err != nil {
				return err
			}
			ref := first(args)
			if ref == "" {
				if ref = rt.Status.ActivePlan; ref == "" {
					return fmt.Errorf("reproduce: the runtime has no active plan yet; name one (a digest from kubectl get runtimerollouts -o wide)")
				}
			}
			p, _, err := kc.Plan(ctx, ref)
			if err != nil {
				return err
			}
			bundle, err := kc.Bundle(ctx, rt.ClusterRuntime)
			if err != nil {
				return err
			}
			if dir == "" {
				dir = "plan-" + strings.TrimPrefix(p.Digest(), "sha256:")[:12]
			}
			res, err := reproduce.Write(dir, reproduce.Inputs{Plan: p, Bundle: bundle, Runtime: rt.ClusterRuntime})
			if err != nil {
				return err
			}
			w := o.env.Stdout
			for _, f := range res.Files {
				fmt.Fprintf(w, "wrote %s\n", f)
			}
			switch {
			case res.Matches:
				fmt.Fprintf(w, "the bundle and runtime spec re-derive %s:\n  kubectl aicr plan --bundle %s --runtime %s\n",
					p.Digest(), filepath.Join(dir, reproduce.BundleFile), filepath.Join(dir, reproduce.RuntimeFile))
				return nil
			case res.Problem != "":
				return fmt.Errorf("reproduce %s: the current bundle and runtime spec do not resolve (%s); %s is the plan as it was", p.Digest(), res.Problem, reproduce.PlanFile)
			default:
				return fmt.Errorf("reproduce %s: the current bundle and runtime spec resolve to %s: they changed after the plan was made; %s is the plan as it was", p.Digest(), res.Derived, reproduce.PlanFile)
			}
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "Folder to write into (default: ./plan-<first 12 hex digits of the digest>)")
	_ = cmd.MarkFlagDirname("dir")
	return cmd
}
