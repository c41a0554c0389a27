//go:build integration

package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// pluginBinary is kubectl-aicr from AICR_BIN_DIR (make test builds it), else built here.
func pluginBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("AICR_BIN_DIR"); dir != "" {
		if p := filepath.Join(dir, Name); fileExists(p) {
			return p
		}
	}
	out := filepath.Join(t.TempDir(), Name)
	cmd := exec.Command("go", "build", "-o", out, "github.com/aicr-run/aicr-operator/cli/cmd/kubectl-aicr")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", Name, err, b)
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// terminal is a tmux session: a real terminal emulator whose screen the test reads.
type terminal struct {
	t    *testing.T
	tmux string
	sock string
}

func newTerminal(t *testing.T, width, height int, command string) *terminal {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv(testenv.EnvRequireTools) == "1" {
			t.Fatalf("tmux is needed to drive a terminal (Debian package tmux): %v", err)
		}
		t.Skipf("tmux is not installed: %v", err)
	}
	term := &terminal{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	term.run("new-session", "-d", "-s", "aicr", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), command)
	t.Cleanup(func() { _, _ = exec.Command(tmux, "-S", term.sock, "kill-server").CombinedOutput() })
	return term
}

func (term *terminal) run(args ...string) string {
	term.t.Helper()
	out, err := exec.Command(term.tmux, append([]string{"-S", term.sock}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the terminal shows; with escapes, its colours too.
func (term *terminal) screen(escapes bool) string {
	args := []string{"capture-pane", "-p", "-t", "aicr"}
	if escapes {
		args = append(args, "-e")
	}
	return term.run(args...)
}

func (term *terminal) waitFor(what string, cond func(string) bool) string {
	term.t.Helper()
	var last string
	deadline := time.Now().Add(commandTimeout)
	for time.Now().Before(deadline) {
		if last = term.screen(false); cond(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	term.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, last)
	return ""
}

// status --watch on a terminal is one screen redrawn in place: each change replaces what was
// shown, in colour, and the last frame stays when the runtime is Ready.
func TestStatusWatchRedrawsInATerminal(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	bin := pluginBinary(t)
	now := time.Now()
	started := metav1.NewTime(now.Add(-3 * time.Minute))
	finished := metav1.NewTime(now.Add(-2 * time.Minute))
	createRollout(t, dyn, &v1alpha1.RuntimeRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "r-tty"},
		Spec:       v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "uid-1", ToDigest: digestB},
		Status: v1alpha1.RuntimeRolloutStatus{Phase: v1alpha1.PhaseProgressing, StartedAt: &started, Steps: []v1alpha1.Step{
			{Index: 1, Release: "cert-manager", Action: v1alpha1.ActionInstall, State: v1alpha1.StepSucceeded, StartedAt: &started, FinishedAt: &finished},
			{Index: 2, Release: "gpu-operator", Action: v1alpha1.ActionInstall, State: v1alpha1.StepInProgress, StartedAt: &finished, DependsOn: []string{"cert-manager"},
				Verdict: &v1alpha1.Verdict{Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Progressing: driver pods starting"}}}},
			{Index: 3, Release: "kubeflow-trainer", Action: v1alpha1.ActionInstall, State: v1alpha1.StepPending, DependsOn: []string{"gpu-operator"}},
		}},
	})
	ensureRuntime(t, env, "gpu-stack")
	setRuntimeStatus(t, env, rollingOut("r-tty"))

	term := newTerminal(t, 120, 40, fmt.Sprintf("env -u NO_COLOR TERM=xterm-256color %s status --watch --kubeconfig %s; echo exit=$?; sleep 600", bin, env.Kubeconfig))
	first := term.waitFor("the first frame", func(s string) bool { return strings.Contains(s, "1/3 steps succeeded") })
	for _, want := range []string{
		"runtime cluster  Ready=False RollingOut: step 1/2 gpu-operator (Upgrade)",
		"rollout r-tty  Progressing  elapsed 3m",
		"[##########--------------------] 1/3 steps succeeded",
		"✓ 1 cert-manager     Install Succeeded",
		"● 2 gpu-operator     Install InProgress",
		"[ ] Healthy: Progressing: driver pods starting",
		"○ 3 kubeflow-trainer Install Pending",
		"after gpu-operator",
		"watching · ",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the first frame lacks %q:\n%s", want, first)
		}
	}
	if coloured := term.screen(true); !strings.Contains(coloured, "\x1b[32m✓") {
		t.Errorf("a succeeded step is not green on the terminal:\n%q", coloured)
	}

	// The next step starts: the frame is replaced, not appended.
	setRolloutStatus(t, dyn, "r-tty", func(s *v1alpha1.RuntimeRolloutStatus) {
		s.Steps[1].State, s.Steps[1].FinishedAt, s.Steps[1].Verdict = v1alpha1.StepSucceeded, &finished, nil
		s.Steps[2].State, s.Steps[2].StartedAt = v1alpha1.StepInProgress, &finished
	})
	second := term.waitFor("the second frame", func(s string) bool { return strings.Contains(s, "2/3 steps succeeded") })
	if strings.Contains(second, "1/3 steps succeeded") || strings.Contains(second, "driver pods starting") {
		t.Errorf("the old frame is still on the screen:\n%s", second)
	}
	if n := strings.Count(second, "runtime cluster "); n != 1 {
		t.Errorf("the header is on the screen %d times, want once (redrawn in place):\n%s", n, second)
	}
	if !strings.Contains(second, "● 3 kubeflow-trainer Install InProgress") || !strings.Contains(second, "no readiness verdict yet") {
		t.Errorf("the second frame:\n%s", second)
	}

	// Ready: the command ends, the last frame stays.
	setRuntimeStatus(t, env, rolledOut("r-tty"))
	last := term.waitFor("the command's end", func(s string) bool { return strings.Contains(s, "exit=0") })
	if !strings.Contains(last, "Ready=True RolledOut: rolled out") || strings.Count(last, "runtime cluster ") != 1 {
		t.Errorf("the last screen:\n%s", last)
	}
}
