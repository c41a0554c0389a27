// Package app is the plugin's command line, built the way kubectl's own commands are: cobra
// commands, kubectl's connection flags (k8s.io/cli-runtime's ConfigFlags: --kubeconfig,
// --context, -n, --as, --token, --request-timeout, ...) and its printers for -o. Every command
// talks to the API server; bundle push/import and check's repo-creds probe also reach an OCI
// registry.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/style"
	"github.com/aicr-run/aicr-operator/cli/internal/version"
)

// Name is the plugin's name as kubectl finds it on the PATH.
const Name = "kubectl-aicr"

// DisplayName is how people call it.
const DisplayName = "kubectl aicr"

// DefaultRegistryRepository is plan --registry-repository's default.
const DefaultRegistryRepository = "registry.example.com/aicr"

// Env is what the commands touch outside themselves; tests replace parts of it.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Clock gives the time of approvals and "since" in the views, and ticks the live views'
	// elapsed times (never the API server: the live views follow a watch).
	Clock clock.WithTicker
}

// DefaultEnv is the real terminal and clock.
func DefaultEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Clock: clock.RealClock{}}
}

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	exitUnknown = ExitFailed
)

// usageError is a command-line mistake: exit 2, with a pointer to --help.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError ends with a given code, printing err when there is one (diff: 1 means "differences").
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// options is the state every command shares: the connection flags and the output settings.
type options struct {
	env    Env
	config *genericclioptions.ConfigFlags
	flags  *pflag.FlagSet
	// operatorNamespace is --operator-namespace, the plugin's first name for -n.
	operatorNamespace string
	color             string
	// ran is set when a command's RunE starts: an error before it is a command-line mistake.
	ran bool
}

// Main runs the plugin and returns the exit code: 0 done, 1 failed, 2 bad command line (and for
// diff: 1 differences found, 2 failed).
func Main(ctx context.Context, args []string, env Env) int {
	o := &options{env: env}
	root := newRoot(o)
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	return o.exit(cmd, err)
}

func (o *options) exit(cmd *cobra.Command, err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(o.env.Stderr, "error: %v\n", ee.err)
		}
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) || !o.ran {
		path := DisplayName
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(o.env.Stderr, "error: %v\nRun '%s --help' for usage.\n", err, path)
		return ExitUsage
	}
	fmt.Fprintf(o.env.Stderr, "error: %v\n", err)
	return exitUnknown
}

func newRoot(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:         Name,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: DisplayName},
		Short:       "Follow, approve and reproduce aicr-operator rollouts",
		Long: `kubectl aicr follows, approves and reproduces the rollouts of aicr-operator, which rolls a GPU
software stack out through Argo CD in dependency order. It shows where a rollout is and what blocks
it (live, from a watch), draws its dependency graph, approves and revokes Remove steps, pauses the
rollout or the engine, shows what the next rollout would change, and previews a bundle without a
cluster. It talks to the Kubernetes API server, with kubectl's connection flags; bundle import and
push, and check's repo-creds probe, also talk to your OCI registry.

The ClusterRuntime and RuntimeRollouts are cluster-scoped; -n/--namespace (or its first name
--operator-namespace) is the operator's namespace, where plans, bundles and the operator's
Deployments live (default aicr-system; the kubeconfig context's namespace is not used).`,
		Example: `  # Where the rollout is, live
  kubectl aicr status --watch

  # The steps of the current rollout, each readiness fence, the approval
  kubectl aicr describe

  # The rollout's dependency graph, as a picture
  kubectl aicr graph -o dot | dot -Tpng > rollout.png

  # Wait in CI until the runtime is Ready
  kubectl aicr wait --for=ready --timeout=10m`,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	o.flags = root.PersistentFlags()
	o.config = genericclioptions.NewConfigFlags(true)
	o.config.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.UserAgent = Name + "/" + version.Get().Version
		return cfg
	}
	o.config.AddFlags(o.flags)
	// -n names the operator namespace here (the plugin's objects are cluster-scoped), and the
	// cache folder's default is shown as the reference page writes it, not this machine's path.
	o.flags.Lookup("namespace").Usage = "The operator's namespace (plans, bundles, the operator's Deployments; default " + v1alpha1.DefaultNamespace + "); --operator-namespace is its other name"
	o.flags.Lookup("cache-dir").DefValue = "$HOME/.kube/cache"
	o.flags.StringVar(&o.operatorNamespace, "operator-namespace", "", "The operator's namespace, as -n/--namespace (its first name, kept for scripts)")
	o.flags.StringVar(&o.color, "color", "auto", "Colour the text views: auto (on a terminal, unless NO_COLOR is set), always or never")
	registerConnectionCompletions(root, o)
	_ = root.RegisterFlagCompletionFunc("color", fixedCompletions("auto", "always", "never"))

	root.AddGroup(
		&cobra.Group{ID: "follow", Title: "Follow a rollout:"},
		&cobra.Group{ID: "act", Title: "Act on the runtime or a rollout:"},
		&cobra.Group{ID: "plan", Title: "Plans:"},
		&cobra.Group{ID: "check", Title: "The installation:"},
		&cobra.Group{ID: "plugin", Title: "The plugin:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			wrapRun(c, o)
			root.AddCommand(c)
		}
	}
	add("follow", newStatusCmd(o), newDescribeCmd(o), newGraphCmd(o), newWaitCmd(o), newEventsCmd(o), newHistoryCmd(o), newLogsCmd(o))
	add("act", newApproveCmd(o), newRevokeCmd(o), newRetryCmd(o))
	add("act", newRuntimeFlagCmds(o)...)
	add("act", newParkedCmd(o))
	add("plan", newPlanCmd(o), newDiffCmd(o), newReproduceCmd(o), newBundleCmd(o))
	add("check", newCheckCmd(o))
	add("plugin", newVersionCmd(o), newCompletionCmd(o))
	root.SetHelpCommandGroupID("plugin")
	return root
}

// wrapRun marks the start of a command's own work (errors before it are command-line mistakes)
// and checks the shared flags first.
func wrapRun(c *cobra.Command, o *options) {
	run := c.RunE
	if run == nil {
		return
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.checkShared(); err != nil {
			return err
		}
		o.ran = true
		return run(cmd, args)
	}
}

func (o *options) checkShared() error {
	switch o.color {
	case "auto", "always", "never":
	default:
		return usagef("--color %q: use auto, always or never", o.color)
	}
	_, err := o.namespace()
	return err
}

// namespace is the operator namespace: --operator-namespace, else -n/--namespace, else
// aicr-system.
func (o *options) namespace() (string, error) {
	opSet := o.flags.Changed("operator-namespace")
	nsSet := o.flags.Changed("namespace")
	ns := ""
	if o.config.Namespace != nil {
		ns = *o.config.Namespace
	}
	switch {
	case opSet && nsSet && ns != o.operatorNamespace:
		return "", usagef("--operator-namespace %q and --namespace %q disagree: they name the same thing, give one", o.operatorNamespace, ns)
	case opSet:
		return o.operatorNamespace, nil
	case nsSet:
		return ns, nil
	}
	return v1alpha1.DefaultNamespace, nil
}

// client connects with kubectl's flags.
func (o *options) client() (*kube.Client, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return kube.New(cfg, ns)
}

// style colours text for w: --color, else a terminal without NO_COLOR.
func (o *options) style(w io.Writer) style.Style {
	switch o.color {
	case "always":
		return style.Style{Color: true}
	case "never":
		return style.Style{}
	}
	return style.Style{Color: printers.AllowsColorOutput(w)}
}

// Arguments checks, as command-line mistakes.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: %s takes none", args[0], cmd.CommandPath())
	}
	return nil
}

func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("too many arguments: %s (%s takes at most %s)", strings.Join(args, " "), cmd.CommandPath(), what)
		}
		return nil
	}
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return usagef("missing argument: %s needs %s", cmd.CommandPath(), what)
		case len(args) > n:
			return usagef("too many arguments: %s (%s takes %s)", strings.Join(args, " "), cmd.CommandPath(), what)
		}
		return nil
	}
}

func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
