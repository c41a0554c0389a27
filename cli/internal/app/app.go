// Package app is the plugin's command line: the subcommands, their flags and how each talks to
// the API server (the only thing it talks to).
package app

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"

	"github.com/aicr-run/aicr-operator/cli/internal/approval"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/preview"
	"github.com/aicr-run/aicr-operator/cli/internal/reproduce"
	"github.com/aicr-run/aicr-operator/cli/internal/view"
)

// Name is the plugin's name as kubectl finds it on the PATH.
const Name = "kubectl-aicr"

// DefaultRegistryRepository is plan --registry-repository's default.
const DefaultRegistryRepository = "registry.example.com/aicr"

// DefaultWatchInterval is how often status --watch asks the API server.
const DefaultWatchInterval = 2 * time.Second

// Env is what the commands touch outside themselves; tests replace parts of it.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Clock gives the time of approvals and "since" in the views, and ticks status --watch.
	Clock clock.WithTicker
	// Config loads the client configuration from --kubeconfig and --context.
	Config func(kubeconfig, context string) (*rest.Config, error)
}

// DefaultEnv is the real terminal, clock and kubeconfig loading.
func DefaultEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Clock: clock.RealClock{}, Config: kube.LoadConfig}
}

// globals are the flags every command takes.
type globals struct {
	kubeconfig string
	context    string
	namespace  string
}

func (g *globals) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&g.context, "context", "", "kubeconfig context (default: the current context)")
	fs.StringVar(&g.namespace, "operator-namespace", v1alpha1.DefaultNamespace, "the operator's namespace (plans, bundles)")
}

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, c *cli, args []string) error
}

var commands = []command{
	{"status", "[--watch]", "where the runtime and its rollout are: step n/N, what blocks it and since when", runStatus},
	{"describe", "[ROLLOUT]", "a rollout's steps, each readiness fence, the approval and the outcome", runDescribe},
	{"approve", "ROLLOUT --reason TEXT [--expires DURATION]", "approve a rollout's Remove steps, as you", runApprove},
	{"revoke", "ROLLOUT --reason TEXT", "revoke a rollout's approval; the rollout then ends RolloutRevoked", runRevoke},
	{"reproduce", "[PLAN] [--dir DIR]", "write a plan's inputs (plan, bundle, runtime spec) so anyone can re-derive it", runReproduce},
	{"plan", "--bundle FILE [--from FILE] [--runtime FILE] [--applications] [-o text|yaml|json]", "without a cluster: the plan digest, steps and Applications a bundle gives", runPlan},
}

type cli struct {
	env Env
	g   globals
	fs  *flag.FlagSet
}

// errUsage marks a command line mistake (exit code 2); its message is already printed.
var errUsage = errors.New("usage")

// Main runs the plugin and returns the exit code: 0 done, 1 failed, 2 bad command line.
func Main(ctx context.Context, args []string, env Env) int {
	c := &cli{env: env}
	top := flag.NewFlagSet(Name, flag.ContinueOnError)
	top.SetOutput(io.Discard)
	c.g.bind(top)
	help := top.Bool("help", false, "show help")
	if err := top.Parse(args); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", Name, err)
		c.usage(env.Stderr)
		return 2
	}
	rest := top.Args()
	if *help || len(rest) == 0 || rest[0] == "help" {
		c.usage(env.Stdout)
		if len(rest) == 0 && !*help {
			return 2
		}
		return 0
	}
	for _, cmd := range commands {
		if cmd.name != rest[0] {
			continue
		}
		c.fs = flag.NewFlagSet(Name+" "+cmd.name, flag.ContinueOnError)
		c.fs.SetOutput(env.Stderr)
		c.fs.Usage = func() {
			fmt.Fprintf(env.Stderr, "Usage: kubectl aicr %s %s\n  %s\n\nFlags:\n", cmd.name, cmd.args, cmd.summary)
			c.fs.PrintDefaults()
		}
		c.g.bind(c.fs)
		err := cmd.run(ctx, c, rest[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
			return 2
		default:
			fmt.Fprintf(env.Stderr, "error: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(env.Stderr, "%s: unknown command %q\n", Name, rest[0])
	c.usage(env.Stderr)
	return 2
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintf(w, "kubectl aicr: follow, approve and reproduce aicr-operator rollouts.\n\nCommands:\n")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-10s %s\n             %s\n", cmd.name, cmd.args, cmd.summary)
	}
	fmt.Fprintf(w, "\nFlags of every command: --kubeconfig FILE, --context NAME, --operator-namespace NS (default %s).\n", v1alpha1.DefaultNamespace)
	fmt.Fprintf(w, "Run kubectl aicr COMMAND --help for a command's flags.\n")
}

// parse parses flags placed anywhere among the positional arguments and checks their count.
func (c *cli) parse(args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || len(pos) > maxPos {
		switch {
		case maxPos == 0:
			fmt.Fprintf(c.env.Stderr, "error: unexpected argument %q\n", pos[0])
		case len(pos) < minPos:
			fmt.Fprintf(c.env.Stderr, "error: missing argument\n")
		default:
			fmt.Fprintf(c.env.Stderr, "error: too many arguments: %s\n", strings.Join(pos, " "))
		}
		c.fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

func (c *cli) client() (*kube.Client, error) {
	cfg, err := c.env.Config(c.g.kubeconfig, c.g.context)
	if err != nil {
		return nil, err
	}
	return kube.New(cfg, c.g.namespace)
}

func first(pos []string) string {
	if len(pos) == 0 {
		return ""
	}
	return pos[0]
}

func runDescribe(ctx context.Context, c *cli, args []string) error {
	pos, err := c.parse(args, 0, 1)
	if err != nil {
		return err
	}
	kc, err := c.client()
	if err != nil {
		return err
	}
	ro, err := kc.CurrentRollout(ctx, first(pos))
	if err != nil {
		return err
	}
	return view.Describe(c.env.Stdout, ro, c.env.Clock.Now())
}

func runApprove(ctx context.Context, c *cli, args []string) error {
	reason := c.fs.String("reason", "", "why (required, at most 1024 characters)")
	expires := c.fs.Duration("expires", 0, "how long the approval lasts, such as 2h (default: until the rollout's deadline)")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kc, err := c.client()
	if err != nil {
		return err
	}
	ro, err := kc.Rollout(ctx, pos[0])
	if err != nil {
		return err
	}
	user, err := kc.WhoAmI(ctx)
	if err != nil {
		return err
	}
	patch, err := approval.Approve(ro, user, *reason, *expires, c.env.Clock.Now())
	if err != nil {
		return err
	}
	out, err := kc.PatchRolloutSpec(ctx, ro, patch)
	if err != nil {
		return err
	}
	a := out.Spec.Approval
	fmt.Fprintf(c.env.Stdout, "runtimerollout %s approved by %s", out.Name, a.ApprovedBy)
	if a.ExpiresAt != nil {
		fmt.Fprintf(c.env.Stdout, " until %s", a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(c.env.Stdout)
	return nil
}

func runRevoke(ctx context.Context, c *cli, args []string) error {
	reason := c.fs.String("reason", "", "why (required, at most 1024 characters)")
	pos, err := c.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kc, err := c.client()
	if err != nil {
		return err
	}
	ro, err := kc.Rollout(ctx, pos[0])
	if err != nil {
		return err
	}
	user, err := kc.WhoAmI(ctx)
	if err != nil {
		return err
	}
	patch, err := approval.Revoke(ro, user, *reason, c.env.Clock.Now())
	if err != nil {
		return err
	}
	out, err := kc.PatchRolloutSpec(ctx, ro, patch)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "runtimerollout %s: approval revoked by %s\n", out.Name, user)
	return nil
}

func runReproduce(ctx context.Context, c *cli, args []string) error {
	dir := c.fs.String("dir", "", "folder to write into (default: ./plan-<first 12 hex digits of the digest>)")
	pos, err := c.parse(args, 0, 1)
	if err != nil {
		return err
	}
	kc, err := c.client()
	if err != nil {
		return err
	}
	rt, err := kc.Runtime(ctx)
	if err != nil {
		return err
	}
	ref := first(pos)
	if ref == "" {
		if ref = rt.Status.ActivePlan; ref == "" {
			return fmt.Errorf("reproduce: the runtime has no active plan yet; name one (a digest from kubectl get runtimerollouts -o wide)")
		}
	}
	p, _, err := kc.Plan(ctx, ref)
	if err != nil {
		return err
	}
	bundle, err := kc.Bundle(ctx, rt)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = "plan-" + strings.TrimPrefix(p.Digest(), "sha256:")[:12]
	}
	out, err := reproduce.Write(*dir, reproduce.Inputs{Plan: p, Bundle: bundle, Runtime: rt})
	if err != nil {
		return err
	}
	for _, f := range out.Files {
		fmt.Fprintf(c.env.Stdout, "wrote %s\n", f)
	}
	switch {
	case out.Matches:
		fmt.Fprintf(c.env.Stdout, "the bundle and runtime spec re-derive %s:\n  kubectl aicr plan --bundle %s --runtime %s\n",
			p.Digest(), filepath.Join(*dir, reproduce.BundleFile), filepath.Join(*dir, reproduce.RuntimeFile))
		return nil
	case out.Problem != "":
		return fmt.Errorf("reproduce %s: the current bundle and runtime spec do not resolve (%s); %s is the plan as it was", p.Digest(), out.Problem, reproduce.PlanFile)
	default:
		return fmt.Errorf("reproduce %s: the current bundle and runtime spec resolve to %s: they changed after the plan was made; %s is the plan as it was", p.Digest(), out.Derived, reproduce.PlanFile)
	}
}

func runStatus(ctx context.Context, c *cli, args []string) error {
	watch := c.fs.Bool("watch", false, "keep following until the runtime is Ready (or Ctrl-C)")
	c.fs.BoolVar(watch, "w", false, "shorthand for --watch")
	interval := c.fs.Duration("interval", DefaultWatchInterval, "how often --watch asks the API server")
	if _, err := c.parse(args, 0, 0); err != nil {
		return err
	}
	if *interval <= 0 {
		return fmt.Errorf("--interval %s: use a positive duration such as 2s", *interval)
	}
	kc, err := c.client()
	if err != nil {
		return err
	}
	if !*watch {
		frame, _, err := statusFrame(ctx, kc, c.env.Clock.Now())
		if err != nil {
			return err
		}
		_, err = io.WriteString(c.env.Stdout, frame)
		return err
	}
	ticker := c.env.Clock.NewTicker(*interval)
	defer ticker.Stop()
	var last string
	for {
		frame, ready, err := statusFrame(ctx, kc, c.env.Clock.Now())
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			frame = "error: " + err.Error() + "\n"
		}
		// A frame's "since" clauses change every second; print only when something else did.
		if key := stripTimes(frame); key != last {
			last = key
			fmt.Fprintf(c.env.Stdout, "--- %s\n%s", c.env.Clock.Now().UTC().Format(time.RFC3339), frame)
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// statusFrame renders the runtime and its rollout, and says whether the runtime is Ready with no
// rollout in flight.
func statusFrame(ctx context.Context, kc *kube.Client, now time.Time) (string, bool, error) {
	rt, err := kc.Runtime(ctx)
	if err != nil {
		return "", false, err
	}
	var ro *v1alpha1.RuntimeRollout
	if rt.Status.Rollout != "" {
		if ro, err = kc.Rollout(ctx, rt.Status.Rollout); err != nil {
			return "", false, err
		}
	}
	var b bytes.Buffer
	if err := view.Status(&b, rt, ro, now); err != nil {
		return "", false, err
	}
	ready := false
	for _, cond := range rt.Status.Conditions {
		if cond.Type == v1alpha1.ConditionReady && cond.Status == metav1.ConditionTrue {
			ready = rt.Status.DesiredPlan == "" || rt.Status.DesiredPlan == rt.Status.ActivePlan
		}
	}
	return b.String(), ready, nil
}

// stripTimes drops the relative times of a frame, so that a frame counts as new only when its
// content changed.
func stripTimes(frame string) string {
	var b strings.Builder
	for _, line := range strings.Split(frame, "\n") {
		for _, marker := range []string{" since ", " (since ", " ago", " (started "} {
			if i := strings.Index(line, marker); i >= 0 {
				line = line[:i]
			}
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func runPlan(_ context.Context, c *cli, args []string) error {
	bundle := c.fs.String("bundle", "", "the bundle file (required; - for standard input)")
	from := c.fs.String("from", "", "an earlier bundle file the stack is at (default: nothing installed)")
	runtimeFile := c.fs.String("runtime", "", "a ClusterRuntime file whose overrides and placement apply")
	apps := c.fs.Bool("applications", false, "also print the Applications exactly as the applier writes them")
	repo := c.fs.String("registry-repository", DefaultRegistryRepository, "registry.repository: where charts/ and wrappers/ live")
	engineNS := c.fs.String("engine-namespace", v1alpha1.DefaultEngineNamespace, "engine.namespace: the Argo CD namespace")
	project := c.fs.String("engine-project", appspec.DefaultProject, "engine.project: the AppProject")
	uid := c.fs.String("runtime-uid", "", "the ClusterRuntime's UID for the ownership annotation (kubectl get clusterruntime cluster -o jsonpath='{.metadata.uid}')")
	format := c.fs.String("o", "text", "output format: text, yaml or json")
	if _, err := c.parse(args, 0, 0); err != nil {
		return err
	}
	if *bundle == "" {
		fmt.Fprintln(c.env.Stderr, "error: --bundle is required")
		c.fs.Usage()
		return errUsage
	}
	switch *format {
	case "text", "yaml", "json":
	default:
		return fmt.Errorf("-o %q: use text, yaml or json", *format)
	}
	o := preview.Options{
		Applications: *apps,
		Settings:     appspec.Settings{EngineNamespace: *engineNS, Project: *project, Repository: *repo},
		RuntimeUID:   *uid,
	}
	var err error
	if o.Bundle, err = preview.ReadFile("--bundle", *bundle, c.env.Stdin); err != nil {
		return err
	}
	if *from != "" {
		if o.From, err = preview.ReadFile("--from", *from, c.env.Stdin); err != nil {
			return err
		}
	}
	if *runtimeFile != "" {
		if o.Runtime, err = preview.ReadFile("--runtime", *runtimeFile, c.env.Stdin); err != nil {
			return err
		}
	}
	res, err := preview.Run(o)
	if err != nil {
		return err
	}
	return preview.Write(c.env.Stdout, res, *format)
}
