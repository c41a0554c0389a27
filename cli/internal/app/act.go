package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aicr-run/aicr-operator/cli/internal/approval"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func newApproveCmd(o *options) *cobra.Command {
	var reason string
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "approve ROLLOUT --reason TEXT [--expires DURATION]",
		Short: "Approve a rollout's Remove steps, as you",
		Long: `Approve a RuntimeRollout's Remove steps in your own name (the API server says who you are, so
--as and --token change it). An approval is set once, with a reason of at most 1024 characters;
it lasts until --expires from now, or by default until the rollout's deadline. The write is guarded
by the rollout's resourceVersion, so a concurrent change fails instead of being overwritten.`,
		Example: `  kubectl aicr approve r-172ca57c59-9f1e2d3c4b5a --reason "dcgm-exporter moved into gpu-operator"
  kubectl aicr approve r-172ca57c59-9f1e2d3c4b5a --reason "maintenance window" --expires 2h`,
		Args:              exactArgs(1, "the rollout's name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, _, err := patchRolloutAsCaller(cmd, o, args[0], func(ro *v1alpha1.RuntimeRollout, user string) (map[string]any, error) {
				return approval.Approve(ro, user, reason, expires, o.env.Clock.Now())
			})
			if err != nil {
				return err
			}
			a := out.Spec.Approval
			fmt.Fprintf(o.env.Stdout, "runtimerollout %s approved by %s", out.Name, a.ApprovedBy)
			if a.ExpiresAt != nil {
				fmt.Fprintf(o.env.Stdout, " until %s", a.ExpiresAt.UTC().Format(time.RFC3339))
			}
			fmt.Fprintln(o.env.Stdout)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "Why (required, at most 1024 characters)")
	cmd.Flags().DurationVar(&expires, "expires", 0, "How long the approval lasts, such as 2h (default: until the rollout's deadline)")
	return cmd
}

func newRevokeCmd(o *options) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke ROLLOUT --reason TEXT",
		Short: "Revoke a rollout's approval; the rollout then ends RolloutRevoked",
		Long: `Revoke the approval of a RuntimeRollout, in your own name and with a reason. The rollout then ends
RolloutRevoked; nothing is rolled back.`,
		Example:           `  kubectl aicr revoke r-172ca57c59-9f1e2d3c4b5a --reason "wrong cluster"`,
		Args:              exactArgs(1, "the rollout's name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, user, err := patchRolloutAsCaller(cmd, o, args[0], func(ro *v1alpha1.RuntimeRollout, user string) (map[string]any, error) {
				return approval.Revoke(ro, user, reason, o.env.Clock.Now())
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.env.Stdout, "runtimerollout %s: approval revoked by %s\n", out.Name, user)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "Why (required, at most 1024 characters)")
	return cmd
}

// patchRolloutAsCaller is what approve and revoke share: read the named rollout, ask the API
// server who the caller is (so --as and --token change it), and write the spec patch decide
// returns for them, guarded by the rollout's resourceVersion. It returns the written rollout and
// the caller's name.
func patchRolloutAsCaller(cmd *cobra.Command, o *options, name string, decide func(ro *v1alpha1.RuntimeRollout, user string) (map[string]any, error)) (*kube.Rollout, string, error) {
	kc, err := o.client()
	if err != nil {
		return nil, "", err
	}
	ctx := cmd.Context()
	ro, err := kc.Rollout(ctx, name)
	if err != nil {
		return nil, "", err
	}
	user, err := kc.WhoAmI(ctx)
	if err != nil {
		return nil, "", err
	}
	patch, err := decide(ro.RuntimeRollout, user)
	if err != nil {
		return nil, "", err
	}
	out, err := kc.PatchRolloutSpec(ctx, ro, patch)
	if err != nil {
		return nil, "", err
	}
	return out, user, nil
}

// runtimeFlag is one verb that sets a boolean of the ClusterRuntime's spec.
type runtimeFlag struct {
	use, field     string
	value          bool
	short, long    string
	example        string
	already, after string
}

var runtimeFlags = []runtimeFlag{
	{
		use: "pause", field: "paused", value: true,
		short:   "Pause the runtime's rollouts (spec.paused): no new step starts",
		long:    "Set spec.paused on the ClusterRuntime: no new step starts; a step in flight finishes. Ready turns False with reason Paused. Safe to repeat.",
		example: "  kubectl aicr pause\n  kubectl aicr status   # Ready=False Paused",
		already: "was already paused", after: "paused: no new step starts; a step in flight finishes (kubectl aicr resume undoes it)",
	},
	{
		use: "resume", field: "paused", value: false,
		short:   "Resume the runtime's rollouts (unset spec.paused)",
		long:    "Unset spec.paused on the ClusterRuntime: the rollout starts its next steps again. Safe to repeat.",
		example: "  kubectl aicr resume",
		already: "was not paused", after: "resumed: the rollout starts its next steps",
	},
	{
		use: "suspend-engine", field: "suspendEngine", value: true,
		short: "Write every owned Application with automated sync off (spec.suspendEngine)",
		long: "Set spec.suspendEngine on the ClusterRuntime: no new step starts, and the operator writes every Application " +
			"it owns with automated sync off, so Argo CD stops syncing and self-healing them (Ready=False EngineSuspended). " +
			"While a step is in flight Ready says EngineSuspensionRefused until the step ends. Safe to repeat.",
		example: "  kubectl aicr suspend-engine\n  kubectl aicr wait --for=condition=Ready=False",
		already: "already had the engine suspended", after: "engine suspended: the owned Applications are written with automated sync off (kubectl aicr resume-engine undoes it)",
	},
	{
		use: "resume-engine", field: "suspendEngine", value: false,
		short:   "Write the owned Applications with automated sync on again (unset spec.suspendEngine)",
		long:    "Unset spec.suspendEngine on the ClusterRuntime: the operator writes the Applications it owns with automated sync on again. Safe to repeat.",
		example: "  kubectl aicr resume-engine",
		already: "did not have the engine suspended", after: "engine resumed: the owned Applications are written with automated sync on",
	},
}

func newRuntimeFlagCmds(o *options) []*cobra.Command {
	var out []*cobra.Command
	for _, f := range runtimeFlags {
		out = append(out, &cobra.Command{
			Use:     f.use,
			Short:   f.short,
			Long:    f.long,
			Example: f.example,
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				kc, err := o.client()
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				rt, err := kc.Runtime(ctx)
				if err != nil {
					return err
				}
				current := rt.Spec.Paused
				if f.field == "suspendEngine" {
					current = rt.Spec.SuspendEngine
				}
				if current == f.value {
					fmt.Fprintf(o.env.Stdout, "clusterruntime %s %s\n", rt.Name, f.already)
					return nil
				}
				rt, err = kc.SetRuntimeFlag(ctx, f.field, f.value)
				if err != nil {
					return err
				}
				fmt.Fprintf(o.env.Stdout, "clusterruntime %s %s\n", rt.Name, f.after)
				return nil
			},
		})
	}
	return out
}
