package app

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/view"
)

func newCompletionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script (commands, flags, rollout names, plan digests)",
		Long: `Print the completion script of kubectl-aicr for a shell. It completes the commands, the flags and
their values, and, from the cluster, the names of RuntimeRollouts (describe, graph, approve, revoke,
wait) and the digests of plans (reproduce), using the connection flags already typed.

For "kubectl aicr <TAB>" (kubectl 1.26 and later asks plugins for completions), put an executable
named kubectl_complete-aicr on the PATH that runs: kubectl-aicr __complete "$@"`,
		Example: `  # bash, for this shell
  source <(kubectl-aicr completion bash)

  # zsh, for every new shell
  kubectl-aicr completion zsh > "${fpath[1]}/_kubectl-aicr"

  # fish
  kubectl-aicr completion fish > ~/.config/fish/completions/kubectl-aicr.fish

  # completion through kubectl itself ("kubectl aicr <TAB>")
  printf '#!/bin/sh\nexec kubectl-aicr __complete "$@"\n' > ~/bin/kubectl_complete-aicr
  chmod +x ~/bin/kubectl_complete-aicr`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		DisableFlagsInUseLine: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s needs one shell: bash, zsh, fish or powershell", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), o.env.Stdout
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(w)
			}
			return usagef("shell %q: use bash, zsh, fish or powershell", args[0])
		},
	}
}

// fixedCompletions completes a flag from a fixed list.
func fixedCompletions(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// rolloutNames completes the first argument with the RuntimeRollouts of the cluster, newest
// first, each described by its phase and progress.
func rolloutNames(o *options) cobra.CompletionFunc {
	return completeFirstArg(o, func(ctx context.Context, kc *kube.Client, toComplete string) ([]string, error) {
		ros, err := kc.Rollouts(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, ro := range ros {
			if strings.HasPrefix(ro.Name, toComplete) {
				phase := cmp.Or(string(ro.Status.Phase), "Pending")
				out = append(out, fmt.Sprintf("%s\t%s, %s", ro.Name, phase, view.Progress(ro.RuntimeRollout)))
			}
		}
		return out, nil
	})
}

// planDigests completes the first argument with the digests of the stored plans.
func planDigests(o *options) cobra.CompletionFunc {
	return completeFirstArg(o, func(ctx context.Context, kc *kube.Client, toComplete string) ([]string, error) {
		names, err := kc.PlanNames(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, nil
	})
}

// completeFirstArg completes a command's one argument from the cluster: candidates lists the
// matches of what was typed, in the order the shell is to show them. A second argument gets no
// completion; a cluster that cannot be read is reported to the shell as an error.
func completeFirstArg(o *options, candidates func(ctx context.Context, kc *kube.Client, toComplete string) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kc, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out, err := candidates(cmd.Context(), kc, toComplete)
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveError
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

// registerConnectionCompletions completes --context, --cluster and --user from the kubeconfig,
// and -n from the cluster's namespaces, as kubectl does.
func registerConnectionCompletions(root *cobra.Command, o *options) {
	fromKubeconfig := func(pick func(ctx, cluster, user map[string]bool) map[string]bool) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			raw, err := o.config.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			ctxs, clusters, users := map[string]bool{}, map[string]bool{}, map[string]bool{}
			for n := range raw.Contexts {
				ctxs[n] = true
			}
			for n := range raw.Clusters {
				clusters[n] = true
			}
			for n := range raw.AuthInfos {
				users[n] = true
			}
			var out []string
			for n := range pick(ctxs, clusters, users) {
				out = append(out, n)
			}
			sort.Strings(out)
			return out, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("context", fromKubeconfig(func(c, _, _ map[string]bool) map[string]bool { return c }))
	_ = root.RegisterFlagCompletionFunc("cluster", fromKubeconfig(func(_, c, _ map[string]bool) map[string]bool { return c }))
	_ = root.RegisterFlagCompletionFunc("user", fromKubeconfig(func(_, _, u map[string]bool) map[string]bool { return u }))
	namespaces := func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		kc, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list, err := kc.Kube.CoreV1().Namespaces().List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	_ = root.RegisterFlagCompletionFunc("namespace", namespaces)
	_ = root.RegisterFlagCompletionFunc("operator-namespace", namespaces)
}
