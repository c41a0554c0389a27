package app

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/history"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// eventKinds are the names --for takes for the operator's two kinds, as kubectl's short names
// and plurals.
var eventKinds = map[string]string{
	"clusterruntime": v1alpha1.KindClusterRuntime, "clusterruntimes": v1alpha1.KindClusterRuntime, "runtime": v1alpha1.KindClusterRuntime,
	"runtimerollout": v1alpha1.KindRuntimeRollout, "runtimerollouts": v1alpha1.KindRuntimeRollout, "rollout": v1alpha1.KindRuntimeRollout,
}

// parseForObject reads --for KIND/NAME.
func parseForObject(s string) (kind, name string, err error) {
	if s == "" {
		return "", "", nil
	}
	k, n, ok := strings.Cut(s, "/")
	kind = eventKinds[strings.ToLower(strings.TrimSuffix(k, "."+v1alpha1.Group))]
	if !ok || n == "" || kind == "" {
		return "", "", usagef("--for %q: use KIND/NAME with KIND one of runtimerollout (rollout) or clusterruntime (runtime), such as --for rollout/r-172ca57c59-none", s)
	}
	return kind, n, nil
}

// eventsDoc prints the Events as kubectl events does, and as a v1 List for -o.
func eventsDoc(evs []corev1.Event, namespace string, now time.Time) (output.Doc, error) {
	var items []*unstructured.Unstructured
	var names []string
	for i := range evs {
		ev := evs[i].DeepCopy()
		ev.APIVersion, ev.Kind = "v1", "Event"
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
		if err != nil {
			return output.Doc{}, fmt.Errorf("encode event %s: %w", ev.Name, err)
		}
		u := &unstructured.Unstructured{Object: m}
		items = append(items, u)
		names = append(names, output.Name(u))
	}
	return output.Doc{
		Object: output.List(items...),
		Names:  names,
		Text: func(w io.Writer) error {
			if len(evs) == 0 {
				_, err := fmt.Fprintf(w, "No events found in %s namespace.\n", namespace)
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
			for i := range evs {
				ev := &evs[i]
				seen := "<unknown>"
				if t := kube.EventTime(ev); !t.IsZero() {
					seen = duration.HumanDuration(now.Sub(t.Time))
				}
				if ev.Count > 1 {
					seen += fmt.Sprintf(" (x%d)", ev.Count)
				}
				obj := strings.ToLower(ev.InvolvedObject.Kind) + "/" + ev.InvolvedObject.Name
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", seen, style.Escape(ev.Type), style.Escape(ev.Reason), style.Escape(obj), style.Escape(ev.Message))
			}
			return tw.Flush()
		},
	}, nil
}

func newEventsCmd(o *options) *cobra.Command {
	var forObj string
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "events [--for rollout/NAME|runtime/cluster]",
		Short: "The planner's Events about the runtime and its rollouts, oldest first",
		Long: `List the Events the planner recorded about the ClusterRuntime and its RuntimeRollouts: a step
failed, blocked or awaiting approval, drift forced back, a rollout created and ended, every
condition transition. Both objects are cluster-scoped, and the planner records their Events in
the operator namespace (-n, default aicr-system), where this command reads them; kubectl finds
them there too: kubectl events -n aicr-system --for runtimerollout/NAME.

--for narrows them to one object: rollout/NAME (or runtimerollout/NAME) or runtime/cluster (or
clusterruntime/cluster).`,
		Example: `  # Everything the planner said, oldest first
  kubectl aicr events

  # One rollout's Events
  kubectl aicr events --for rollout/r-172ca57c59-none

  # The warnings, for a script
  kubectl aicr events -o jsonpath='{range .items[?(@.type=="Warning")]}{.reason}{"\n"}{end}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kind, name, err := parseForObject(forObj)
			if err != nil {
				return err
			}
			if err := out.Validate(); err != nil {
				return err
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			evs, err := kc.Events(cmd.Context(), kind, name)
			if err != nil {
				return err
			}
			d, err := eventsDoc(evs, kc.Namespace, o.env.Clock.Now())
			if err != nil {
				return err
			}
			return out.Print(o.env.Stdout, d)
		},
	}
	cmd.Flags().StringVar(&forObj, "for", "", "Only the Events of this object: rollout/NAME or runtime/cluster")
	out.AddFlags(cmd)
	return cmd
}

func newHistoryCmd(o *options) *cobra.Command {
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "history",
		Short: "The runtime's rollouts, newest first: plans, outcome, who approved, how long",
		Long: `List the RuntimeRollouts of the ClusterRuntime, newest first: the plans each moved from and to
(their first 12 hex digits; -o json has them whole), why the planner created it, its outcome (or
phase while in flight), its steps succeeded of all, who approved its Remove steps (and who
revoked that approval), when its first step started and how long it took.

The rollout the runtime's status names is marked *, the one that put the active plan in place
(active). To go back to an earlier plan, put back the ClusterRuntime spec and bundle it came
from (kubectl aicr reproduce PLAN writes them out): the planner resolves the same inputs to the
same digest and rolls out to it (docs/planner.md, Back to a previous plan).`,
		Example: `  kubectl aicr history

  # The plans and outcomes, for a script
  kubectl aicr history -o jsonpath='{range .items[*]}{.name} {.toPlan} {.outcome}{"\n"}{end}'`,
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
			var current *v1alpha1.ClusterRuntime
			switch {
			case errors.Is(err, kube.ErrRuntimeNotFound):
			case err != nil:
				return err
			default:
				current = rt.ClusterRuntime
			}
			ros, err := kc.RuntimeRollouts(ctx)
			if err != nil {
				return err
			}
			typed := make([]*v1alpha1.RuntimeRollout, 0, len(ros))
			var names []string
			for _, ro := range ros {
				typed = append(typed, ro.RuntimeRollout)
				names = append(names, output.Name(ro.Raw()))
			}
			now := o.env.Clock.Now()
			entries := history.Entries(typed, current, now)
			return out.Print(o.env.Stdout, output.Doc{
				Object: map[string]any{"apiVersion": "v1", "kind": "List", "items": entries},
				Names:  names,
				Text:   func(w io.Writer) error { return history.Write(w, entries, now) },
			})
		},
	}
	out.AddFlags(cmd)
	return cmd
}

func newRetryCmd(o *options) *cobra.Command {
	var resourceVersion string
	cmd := &cobra.Command{
		Use:   "retry ROLLOUT [--resource-version RV]",
		Short: "Try a failed or expired rollout's move again",
		Long: `Retry a RuntimeRollout that ended RolloutFailed or RolloutExpired: the runtime's current rollout,
while the runtime still wants its plan. The command deletes it, guarded by the UID and
resourceVersion it read (or --resource-version, the one you looked at): if the planner or anyone
wrote it since, nothing is deleted and the command says so. The planner then creates the rollout
of the same move again, with the same name, its steps computed from what the stack holds now,
and starts it. Running retry again finds that new rollout in flight and refuses.

A rollout that succeeded, was superseded or revoked, or is still in flight is refused, with why.`,
		Example: `  kubectl aicr retry r-172ca57c59-none
  kubectl aicr status --watch

  # Only if it is still as you saw it
  kubectl aicr retry r-172ca57c59-none --resource-version 48213`,
		Args:              exactArgs(1, "the rollout's name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ro, err := kc.Rollout(ctx, args[0])
			if err != nil {
				return err
			}
			if resourceVersion != "" && resourceVersion != ro.ResourceVersion {
				return fmt.Errorf("runtimerollout %s is at resourceVersion %s, not %s (--resource-version): it changed since you looked; look again (kubectl aicr describe %s)", ro.Name, ro.ResourceVersion, resourceVersion, ro.Name)
			}
			var current *v1alpha1.ClusterRuntime
			switch rt, err := kc.Runtime(ctx); {
			case errors.Is(err, kube.ErrRuntimeNotFound):
			case err != nil:
				return err
			default:
				current = rt.ClusterRuntime
			}
			if err := history.Retryable(ro.RuntimeRollout, current); err != nil {
				return err
			}
			if err := kc.DeleteRollout(ctx, ro); err != nil {
				return err
			}
			fmt.Fprintf(o.env.Stdout, "runtimerollout %s (%s) deleted at resourceVersion %s; the planner creates it again for the same move, plan %s (kubectl aicr status --watch)\n",
				ro.Name, ro.Status.Outcome, ro.ResourceVersion, ro.Spec.ToDigest)
			return nil
		},
	}
	cmd.Flags().StringVar(&resourceVersion, "resource-version", "", "Retry only if the rollout is still at this resourceVersion")
	return cmd
}
