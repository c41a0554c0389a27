package app

import (
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/style"
	"github.com/aicr-run/aicr-operator/cli/internal/view"
)

func runtimeOf(s kube.Snapshot) *v1alpha1.ClusterRuntime {
	if s.Runtime == nil {
		return nil
	}
	return s.Runtime.ClusterRuntime
}

func rolloutOf(s kube.Snapshot) *v1alpha1.RuntimeRollout {
	if s.Rollout == nil {
		return nil
	}
	return s.Rollout.RuntimeRollout
}

func rawOf(rt *kube.Runtime, ro *kube.Rollout) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	if rt != nil {
		out = append(out, rt.Raw())
	}
	if ro != nil {
		out = append(out, ro.Raw())
	}
	return out
}

// statusDoc is status's output: the runtime and its rollout (a v1 List for -o json|yaml).
func statusDoc(s kube.Snapshot, now func() time.Time) output.Doc {
	raws := rawOf(s.Runtime, s.Rollout)
	d := output.Doc{Object: output.List(raws...)}
	for _, u := range raws {
		d.Names = append(d.Names, output.Name(u))
	}
	d.Text = textOf(func(w io.Writer) error {
		if s.Runtime == nil {
			_, err := io.WriteString(w, "clusterruntime "+v1alpha1.RuntimeName+": not found; create it first (examples/clusterruntime.yaml)\n")
			return err
		}
		return view.Status(w, s.Runtime.ClusterRuntime, rolloutOf(s), now())
	})
	return d
}

// runtimeReady says the runtime is Ready at its desired plan (status --watch ends there).
func runtimeReady(rt *v1alpha1.ClusterRuntime) bool {
	if rt == nil {
		return false
	}
	for _, c := range rt.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue {
			return rt.Status.DesiredPlan == "" || rt.Status.DesiredPlan == rt.Status.ActivePlan
		}
	}
	return false
}

func newStatusCmd(o *options) *cobra.Command {
	var watch bool
	var interval time.Duration
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Where the runtime and its rollout are: step n/N, what blocks it and since when",
		Long: `Show the ClusterRuntime's Ready condition, its plans, the conditions that need a person, and the
rollout in flight: its phase, the step it is at, and what holds it (open readiness fences, an
approval, a blocked or failed step) since when.

With --watch the command follows the API server with a watch (no polling) until the runtime is
Ready at its desired plan, or Ctrl-C. On a terminal it redraws one screen in place: every step with
its state, the open fences, the elapsed time and a progress bar such as 7/18. When the output is
not a terminal it prints one line per change instead; with -o it prints the objects again after
each change.`,
		Example: `  # Once
  kubectl aicr status

  # Live, until Ready
  kubectl aicr status --watch

  # The Ready reason, for a script
  kubectl aicr status -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].reason}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Validate(); err != nil {
				return err
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rt, err := kc.Runtime(ctx)
			switch {
			case watch && errors.Is(err, kube.ErrRuntimeNotFound):
				// status --watch waits for the runtime to be created.
			case err != nil:
				return err
			}
			if !watch {
				var ro *kube.Rollout
				if rt.Status.Rollout != "" {
					if ro, err = kc.Rollout(ctx, rt.Status.Rollout); err != nil {
						return err
					}
				}
				return out.Print(o.env.Stdout, statusDoc(kube.Snapshot{Runtime: rt, Rollout: ro}, o.env.Clock.Now))
			}
			return o.runLive(ctx, kc, out, liveView{
				follow: kube.FollowOptions{Runtime: true},
				screen: func(s kube.Snapshot, now time.Time, st style.Style) ([]string, error) {
					return view.StatusScreen(runtimeOf(s), rolloutOf(s), now, st), nil
				},
				doc:  func(s kube.Snapshot) output.Doc { return statusDoc(s, o.env.Clock.Now) },
				done: func(s kube.Snapshot) bool { return runtimeReady(runtimeOf(s)) },
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Follow the runtime with a watch until it is Ready (or Ctrl-C)")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "Ignored: --watch follows a watch now")
	_ = cmd.Flags().MarkDeprecated("interval", "status --watch follows the API server with a watch and no longer polls")
	out.AddFlags(cmd)
	return cmd
}

// describeDoc is a rollout's description; with the runtime (nil: not read), also the releases
// of its active plan not ready since their rollout.
func describeDoc(ro *kube.Rollout, rt *kube.Runtime, now func() time.Time) output.Doc {
	raw := ro.Raw()
	return output.Doc{
		Object: raw,
		Names:  []string{output.Name(raw)},
		Text: textOf(func(w io.Writer) error {
			t := now()
			if err := view.Describe(w, ro.RuntimeRollout, t); err != nil || rt == nil {
				return err
			}
			return view.DescribeReleases(w, rt.ClusterRuntime, t)
		}),
	}
}

func newDescribeCmd(o *options) *cobra.Command {
	var watch bool
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "describe [ROLLOUT]",
		Short: "A rollout's steps, each readiness fence, the approval and the outcome",
		Long: `Describe a RuntimeRollout (the runtime's current one when no name is given): its plans, phase,
outcome and deadline, the approval, every step with its state and times, and for each step the
readiness verdict with every fence (passed, open or failed) and what it saw; then the releases of the
runtime's active plan that readiness judged not ready after their rollout, with their open fences.

With --watch the command follows the rollout with a watch until it ends (an outcome), or Ctrl-C:
redrawn in place on a terminal, with a progress bar and the elapsed time on top; one line per
change otherwise.`,
		Example: `  # The current rollout
  kubectl aicr describe

  # A named one, live
  kubectl aicr describe r-172ca57c59-none --watch

  # Its steps as JSON
  kubectl aicr describe r-172ca57c59-none -o jsonpath='{.status.steps}'`,
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
			if !watch {
				rt, err := kc.Runtime(ctx)
				switch {
				case errors.Is(err, kube.ErrRuntimeNotFound):
					rt = nil // a named rollout of a runtime that is gone
				case err != nil:
					return err
				}
				return out.Print(o.env.Stdout, describeDoc(ro, rt, o.env.Clock.Now))
			}
			return o.runLive(ctx, kc, out, liveView{
				follow: kube.FollowOptions{Rollout: ro.Name},
				screen: func(s kube.Snapshot, now time.Time, st style.Style) ([]string, error) {
					if s.Rollout == nil {
						return []string{"runtimerollout " + style.Escape(s.RolloutName) + ": not found (deleted?)"}, nil
					}
					return view.DescribeScreen(s.Rollout.RuntimeRollout, now, st)
				},
				doc: func(s kube.Snapshot) output.Doc {
					if s.Rollout == nil {
						return output.Doc{Object: output.List(), Text: func(io.Writer) error { return nil }}
					}
					return describeDoc(s.Rollout, nil, o.env.Clock.Now)
				},
				done: func(s kube.Snapshot) bool { return s.Rollout != nil && s.Rollout.Status.Outcome != "" },
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Follow the rollout with a watch until it ends (or Ctrl-C)")
	out.AddFlags(cmd)
	return cmd
}
