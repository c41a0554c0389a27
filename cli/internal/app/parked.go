package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func newParkedCmd(o *options) *cobra.Command {
	var retry bool
	cmd := &cobra.Command{
		Use:   "parked [--retry]",
		Short: "Messages the operator gave up on after their handling kept failing, and sending them back",
		Long: `Show the runtime's MessagesParked condition: the messages (commands to the applier, events to the
planner) whose handling failed --park-after times in a row (10 by default, about a minute and a
half with the backoff between them), parked on the AICR_PARKED stream with where they came from and
the last error, instead of being redelivered forever.

With --retry, ask the planner to send every parked message back to where it came from (the
annotation operator.aicr.run/retry-parked on the ClusterRuntime, which the planner removes once it
did). Fix the cause first: a message that fails again is parked again. Safe to repeat.`,
		Example: `  kubectl aicr parked
  kubectl aicr parked --retry
  kubectl aicr wait --for=condition=MessagesParked=False`,
		Args: noArgs,
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
			if retry {
				rt, err = kc.SetRuntimeAnnotation(ctx, v1alpha1.AnnotationRetryParked, o.env.Clock.Now().UTC().Format(time.RFC3339Nano))
				if err != nil {
					return err
				}
				fmt.Fprintf(o.env.Stdout, "clusterruntime %s: the planner sends every parked message back, then removes %s\n", rt.Name, v1alpha1.AnnotationRetryParked)
				return nil
			}
			c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionMessagesParked)
			if c == nil || c.Status != metav1.ConditionTrue {
				fmt.Fprintf(o.env.Stdout, "clusterruntime %s: no message is parked\n", rt.Name)
				return nil
			}
			fmt.Fprintf(o.env.Stdout, "clusterruntime %s: %s=%s %s: %s\n", rt.Name, c.Type, c.Status, c.Reason, c.Message)
			return nil
		},
	}
	cmd.Flags().BoolVar(&retry, "retry", false, "Send every parked message back to where it came from")
	return cmd
}
