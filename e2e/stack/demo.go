package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Demo is what make demo and make compose-demo show of a rollout.
type Demo struct {
	// Name prefixes the demo's lines ("demo", "compose-demo").
	Name string
	// What names the bundle rolled out.
	What string
	// BinDir holds kubectl-aicr; Kubeconfig is the one it watches the stack with.
	BinDir, Kubeconfig string
	// Timeout bounds the wait for Ready.
	Timeout time.Duration
	// Out receives the demo's lines and the plugin's screen.
	Out io.Writer
}

// ApplyDemo applies the bundle and a ClusterRuntime placing the accelerated releases on the
// GPU nodes.
func (s *Stack) ApplyDemo(ctx context.Context, bundle []byte) error {
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		return err
	}
	spec := DefaultRuntimeSpec()
	spec.Placement = &v1alpha1.Placement{Accelerated: &v1alpha1.NodePlacement{NodeSelector: map[string]string{GPUNodeLabel: "true"}}}
	return s.ApplyRuntime(ctx, spec)
}

// Ready ends a demo whose runtime rt is Ready=True/RolledOut: it says so (how long since start,
// the plan, the rollout) and, unless check, how to look around from another terminal (the
// kubeconfig, the runtime, the Applications, the plugin's describe of the rollout, then look:
// the stack's own command, such as where its logs are) and what Ctrl-C does (onInterrupt), then
// waits for ctx to end.
func (d Demo) Ready(ctx context.Context, rt *v1alpha1.ClusterRuntime, start time.Time, check bool, look, onInterrupt string) {
	fmt.Fprintf(d.Out, "\n%s: Ready=True/RolledOut in %s (plan %s, rollout %s)\n", d.Name, time.Since(start).Round(time.Second), rt.Status.ActivePlan, rt.Status.Rollout)
	if check {
		return
	}
	fmt.Fprintf(d.Out, `
Look around (in another terminal):
  export KUBECONFIG=%s
  kubectl get clusterruntime cluster -o wide
  kubectl get applications -n argocd
  %s describe %s
  %s

Press Ctrl-C to %s.
`, d.Kubeconfig, filepath.Join(d.BinDir, "kubectl-aicr"), rt.Status.Rollout, look, onInterrupt)
	<-ctx.Done()
}

// ShowRollout shows the rollout ApplyDemo started live until the runtime is
// Ready=True/RolledOut (the plugin's kubectl aicr status --watch; without the plugin, a line per
// change of the progress and what blocks it), and returns the runtime then.
func (s *Stack) ShowRollout(ctx context.Context, d Demo) (*v1alpha1.ClusterRuntime, error) {
	fmt.Fprintf(d.Out, "%s: ClusterRuntime applied with bundle %s; rolling out\n", d.Name, d.What)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := s.showProgress(watchCtx, d)
	rt, err := s.WaitCondition(ctx, d.Timeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	stopWatch()
	<-watchDone
	return rt, err
}

// showProgress runs the plugin's live view when it is built, else prints progress changes,
// until ctx ends; the channel closes once it stopped.
func (s *Stack) showProgress(ctx context.Context, d Demo) <-chan struct{} {
	done := make(chan struct{})
	plugin := filepath.Join(d.BinDir, "kubectl-aicr")
	if _, err := os.Stat(plugin); err == nil {
		cmd := exec.CommandContext(ctx, plugin, "status", "--watch", "--kubeconfig", d.Kubeconfig, "--operator-namespace", OperatorNamespace)
		cmd.Stdout, cmd.Stderr = d.Out, os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 5 * time.Second
		go func() {
			defer close(done)
			if err := cmd.Run(); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "%s: kubectl-aicr status --watch: %v\n", d.Name, err)
			}
		}()
		return done
	}
	go func() {
		defer close(done)
		last := ""
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rt, err := s.Runtime(ctx)
			if err != nil {
				continue
			}
			line := fmt.Sprintf("%s | %s", rt.Status.Progress, Blocker(rt))
			if line != last {
				fmt.Fprintf(d.Out, "  %s %s\n", time.Now().Format("15:04:05"), line)
				last = line
			}
		}
	}()
	return done
}
