package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/diff"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
)

func newDiffCmd(o *options) *cobra.Command {
	var bundle, engineNS, project, repo string
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "diff [--bundle FILE]",
		Short: "What the next rollout would change: the live Applications against the desired plan",
		Long: `Compare the Applications the operator owns (in the engine namespace) with the Applications the
desired plan renders (the applier's builder), release by release, and say the step each would take:
Install (no Application yet), Upgrade (a new chart, revision, values or destination), Apply (new
dependencies, gate flag or sync policy), Remove (the release left the plan), and Foreign for an
Application with the operator's labels but another runtime's UID. Then a unified diff of each
Application that changes (its spec and the operator's labels and annotations).

The desired plan is the runtime's status.desiredPlan, or, before the planner has computed one, the
plan the runtime's bundle and spec resolve to. With --bundle, the plan that bundle file gives with
the live runtime's overrides and placement: what a bundle change would do to this cluster.

The registry repository and the AppProject are read from the live Applications unless given.
Exit status as kubectl diff: 0 no differences, 1 differences, 2 failed.`,
		Example: `  # What the planner is about to do
  kubectl aicr diff

  # What a new bundle would do to this cluster
  kubectl aicr diff --bundle gpu-stack-1.1.0.yaml

  # The changes as data
  kubectl aicr diff -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Validate(); err != nil {
				return err
			}
			res, err := o.diff(cmd.Context(), bundle, appspec.Settings{EngineNamespace: engineNS, Project: project, Repository: repo})
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var names []string
			for _, c := range res.Changes {
				if c.Action != diff.Unchanged {
					names = append(names, "application.argoproj.io/"+c.Release)
				}
			}
			st := o.style(o.env.Stdout)
			if err := out.Print(o.env.Stdout, output.Doc{
				Object: res,
				Names:  names,
				Text:   func(w io.Writer) error { return diff.Text(w, res, st) },
			}); err != nil {
				return &exitError{code: 2, err: err}
			}
			if res.Changed() > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bundle, "bundle", "", "A bundle file to compare with instead of the desired plan (- for standard input)")
	f.StringVar(&engineNS, "engine-namespace", v1alpha1.DefaultEngineNamespace, "engine.namespace: where the Applications live")
	f.StringVar(&project, "engine-project", "", "engine.project: the AppProject (default: the live Applications', else "+appspec.DefaultProject+")")
	f.StringVar(&repo, "registry-repository", "", "registry.repository (default: read from the live Applications)")
	_ = cmd.MarkFlagFilename("bundle", "yaml", "yml", "json")
	out.AddFlags(cmd)
	return cmd
}

func (o *options) diff(ctx context.Context, bundle string, s appspec.Settings) (*diff.Result, error) {
	kc, err := o.client()
	if err != nil {
		return nil, err
	}
	rt, err := kc.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	desired, source, err := o.desiredPlan(ctx, kc, rt, bundle)
	if err != nil {
		return nil, err
	}
	live, err := kc.OwnedApplications(ctx, s.EngineNamespace)
	if err != nil {
		return nil, err
	}
	res, err := diff.Compute(desired, live, diff.Options{Settings: s, RuntimeUID: string(rt.UID), SuspendEngine: rt.Spec.SuspendEngine})
	if err != nil {
		return nil, err
	}
	res.Source = source
	return res, nil
}

// desiredPlan is the plan the next rollout moves to, and where it came from.
func (o *options) desiredPlan(ctx context.Context, kc *kube.Client, rt *kube.Runtime, bundle string) (*plan.Plan, string, error) {
	in := plan.Inputs{Overrides: rt.Spec.Overrides, Placement: rt.Spec.Placement}
	switch {
	case bundle != "":
		data, err := preview.ReadFile("--bundle", bundle, o.env.Stdin)
		if err != nil {
			return nil, "", err
		}
		p, err := preview.Resolve("--bundle", data, in)
		if err != nil {
			return nil, "", err
		}
		return p, "--bundle " + bundle + " with the runtime's overrides and placement", nil
	case rt.DeletionTimestamp != nil && rt.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete:
		return nil, "the runtime is being deleted with deletionPolicy Delete", nil
	case rt.Status.DesiredPlan != "":
		p, _, err := kc.Plan(ctx, rt.Status.DesiredPlan)
		if err != nil {
			return nil, "", err
		}
		return p, "status.desiredPlan", nil
	}
	data, err := kc.Bundle(ctx, rt.ClusterRuntime)
	if err != nil {
		return nil, "", err
	}
	p, err := preview.Resolve("the runtime's bundle", data, in)
	if err != nil {
		return nil, "", fmt.Errorf("resolve the runtime's bundle: %w", err)
	}
	return p, "the runtime's bundle and spec (no status.desiredPlan yet)", nil
}
