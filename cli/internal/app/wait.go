package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
)

// waitFor is a parsed --for.
type waitFor struct {
	// kind is "ready", "condition" or "outcome".
	kind string
	// condType and condStatus are --for=condition=TYPE[=STATUS].
	condType, condStatus string
	// outcome is --for=outcome[=OUTCOME] ("" for any outcome).
	outcome string
}

func parseFor(s string) (waitFor, error) {
	bad := fmt.Errorf("--for %q: use ready, condition=TYPE[=STATUS] (a ClusterRuntime condition such as condition=Stalled=False) or outcome[=OUTCOME] (a rollout's end, such as outcome=RolloutSucceeded)", s)
	switch {
	case s == "ready":
		return waitFor{kind: "ready"}, nil
	case strings.HasPrefix(s, "condition="):
		parts := strings.SplitN(strings.TrimPrefix(s, "condition="), "=", 2)
		f := waitFor{kind: "condition", condType: parts[0], condStatus: string(metav1.ConditionTrue)}
		if len(parts) == 2 {
			f.condStatus = parts[1]
		}
		switch {
		case f.condType == "":
			return waitFor{}, bad
		case f.condStatus != "True" && f.condStatus != "False" && f.condStatus != "Unknown":
			return waitFor{}, fmt.Errorf("--for %q: the status must be True, False or Unknown", s)
		}
		return f, nil
	case s == "outcome":
		return waitFor{kind: "outcome"}, nil
	case strings.HasPrefix(s, "outcome="):
		o := strings.TrimPrefix(s, "outcome=")
		switch o {
		case v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked, v1alpha1.OutcomeSuperseded:
			return waitFor{kind: "outcome", outcome: o}, nil
		}
		return waitFor{}, fmt.Errorf("--for %q: the outcome must be one of %s, %s, %s, %s, %s", s,
			v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked, v1alpha1.OutcomeSuperseded)
	}
	return waitFor{}, bad
}

// failedOutcome says whether an outcome means the rollout did not get the stack to its plan.
func failedOutcome(outcome string) bool {
	switch outcome {
	case v1alpha1.OutcomeFailed, v1alpha1.OutcomeExpired, v1alpha1.OutcomeRevoked:
		return true
	}
	return false
}

// check says whether the wait is over: met, or failed for good (a non-nil error), and what was
// last seen (for the timeout's message).
func (f waitFor) check(s kube.Snapshot) (bool, string, error) {
	rt, ro := runtimeOf(s), rolloutOf(s)
	switch f.kind {
	case "outcome":
		if ro == nil {
			return false, "rollout " + s.RolloutName + " not found", nil
		}
		seen := fmt.Sprintf("rollout %s: phase %s, outcome %s", ro.Name, orDash(string(ro.Status.Phase)), orDash(ro.Status.Outcome))
		switch {
		case ro.Status.Outcome == "":
			return false, seen, nil
		case f.outcome == "" || f.outcome == ro.Status.Outcome:
			return true, seen, nil
		}
		return false, seen, fmt.Errorf("rollout %s ended %s, not %s: %s", ro.Name, ro.Status.Outcome, f.outcome, ro.Status.Message)
	}
	if rt == nil {
		return false, "clusterruntime " + v1alpha1.RuntimeName + " not found", nil
	}
	ready := ""
	for _, c := range rt.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			ready = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	seen := "clusterruntime " + rt.Name + ": " + orDash(ready)
	if f.kind == "condition" {
		for _, c := range rt.Status.Conditions {
			if c.Type == f.condType {
				seen = fmt.Sprintf("clusterruntime %s: %s=%s %s: %s", rt.Name, c.Type, c.Status, c.Reason, c.Message)
				return string(c.Status) == f.condStatus, seen, nil
			}
		}
		return false, fmt.Sprintf("clusterruntime %s: no %s condition", rt.Name, f.condType), nil
	}
	if runtimeReady(rt) {
		return true, seen, nil
	}
	// The rollout to the desired plan ended without getting there: Ready will not turn True
	// without a change, so waiting longer is pointless.
	if ro != nil && failedOutcome(ro.Status.Outcome) && ro.Spec.ToDigest == rt.Status.DesiredPlan {
		return false, seen, fmt.Errorf("rollout %s ended %s: %s (Ready turns True only after a change starts a new rollout)", ro.Name, ro.Status.Outcome, ro.Status.Message)
	}
	return false, seen, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newWaitCmd(o *options) *cobra.Command {
	var forFlag string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait [ROLLOUT] --for=ready|condition=TYPE[=STATUS]|outcome[=OUTCOME]",
		Short: "Wait, with a watch, until the runtime is Ready, has a condition, or a rollout ends",
		Long: `Wait for a state, following the API server with a watch, for scripts and CI. It exits 0 once
the state is reached and 1 when the timeout passes first (saying what it last saw), or as soon as
the state cannot come any more.

--for=ready: the ClusterRuntime is Ready=True at its desired plan. It fails at once when the
rollout to that plan ended RolloutFailed, RolloutExpired or RolloutRevoked.

--for=condition=TYPE[=STATUS]: a ClusterRuntime condition (Ready, Stalled, Resolved,
EngineAvailable) has the status (default True).

--for=outcome[=OUTCOME]: the rollout (ROLLOUT, else the runtime's current one) has ended, or
ended with OUTCOME (RolloutSucceeded, RolloutFailed, RolloutExpired, RolloutRevoked,
RolloutSuperseded).

A ClusterRuntime that does not exist yet is waited for. --timeout 0 checks once; a negative
timeout waits without end.`,
		Example: `  # In CI, after applying a ClusterRuntime
  kubectl aicr wait --for=ready --timeout=10m

  # Until nothing needs a person
  kubectl aicr wait --for=condition=Stalled=False

  # Until a rollout ends, succeeding
  kubectl aicr wait r-172ca57c59-none --for=outcome=RolloutSucceeded --timeout=1h`,
		Args:              maxArgs(1, "one rollout name"),
		ValidArgsFunction: rolloutNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forFlag == "" {
				return usagef("--for is required: ready, condition=TYPE[=STATUS] or outcome[=OUTCOME]")
			}
			f, err := parseFor(forFlag)
			if err != nil {
				return err
			}
			if len(args) > 0 && f.kind != "outcome" {
				return usagef("a rollout name goes with --for=outcome only; --for=%s waits for the ClusterRuntime", forFlag)
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			follow := kube.FollowOptions{Runtime: true}
			if f.kind == "outcome" {
				ro, err := kc.CurrentRollout(ctx, first(args))
				if err != nil {
					return err
				}
				follow = kube.FollowOptions{Rollout: ro.Name}
			} else if _, err := kc.Runtime(ctx); err != nil && !errors.Is(err, kube.ErrRuntimeNotFound) {
				return err
			}
			return o.wait(ctx, kc, follow, f, timeout)
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "", "The state to wait for: ready, condition=TYPE[=STATUS] or outcome[=OUTCOME]")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "How long to wait: 0 checks once, a negative value waits without end")
	_ = cmd.RegisterFlagCompletionFunc("for", fixedCompletions("ready", "condition=Ready", "condition=Stalled=False", "outcome",
		"outcome="+v1alpha1.OutcomeSucceeded))
	return cmd
}

func (o *options) wait(ctx context.Context, kc *kube.Client, follow kube.FollowOptions, f waitFor, timeout time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := o.env.Clock.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C()
	}
	snaps := kc.Follow(wctx, follow)
	seen := "nothing yet"
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting; last seen: %s", seen)
		case <-deadline:
			msg := fmt.Sprintf("timed out after %s waiting for %s; last seen: %s", timeout, f.describe(), seen)
			if lastErr != nil {
				msg += " (watch error: " + lastErr.Error() + ")"
			}
			return errors.New(msg)
		case s, ok := <-snaps:
			if !ok {
				return fmt.Errorf("the watch ended; last seen: %s", seen)
			}
			lastErr = s.Err
			if !s.Synced {
				continue
			}
			met, now, err := f.check(s)
			seen = now
			switch {
			case err != nil:
				return err
			case met:
				fmt.Fprintf(o.env.Stdout, "%s: %s met (%s)\n", waitSubject(follow), f.describe(), seen)
				return nil
			case timeout == 0:
				return fmt.Errorf("%s is not met; seen: %s", f.describe(), seen)
			}
		}
	}
}

func waitSubject(f kube.FollowOptions) string {
	if f.Rollout != "" {
		return "runtimerollout " + f.Rollout
	}
	return "clusterruntime " + v1alpha1.RuntimeName
}

func (f waitFor) describe() string {
	switch f.kind {
	case "condition":
		return "condition " + f.condType + "=" + f.condStatus
	case "outcome":
		if f.outcome != "" {
			return "outcome " + f.outcome
		}
		return "an outcome"
	}
	return "ready"
}
