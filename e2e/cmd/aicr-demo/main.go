// Command aicr-demo is `make demo`: it starts the local stack (kube-apiserver, etcd,
// controller-manager, scheduler, kwok, Argo CD v3.4.2, an OCI registry, embedded NATS) and the
// five binaries as separate processes, pushes the example GPU-stack charts, applies a
// ClusterRuntime and shows the rollout live until Ready=True/RolledOut. Then it leaves everything
// running until Ctrl-C. With --check it exits once Ready (0) or with the blocking reason (1).
// With --bundle DIR (make demo BUNDLE=examples/aicr-bundle) it rolls out an AICR bundle folder
// instead, imported with kubectl aicr bundle import (its recipe.yaml, when there, gives the
// dependencies).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aicr-run/aicr-operator/e2e/stack"
)

func main() {
	binDir := flag.String("bin-dir", "bin", "folder holding the five binaries and kubectl-aicr (make build)")
	check := flag.Bool("check", false, "exit once Ready (0), or with the blocking reason (1), and stop everything")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long the rollout may take before the demo gives up")
	aicrDir := flag.String("bundle", "", "an AICR bundle folder (what aicr bundle writes) to import and roll out instead of the example bundle")
	flag.Parse()
	os.Exit(run(*binDir, *aicrDir, *check, *timeout))
}

func run(binDir, aicrDir string, check bool, timeout time.Duration) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := filepath.Abs(binDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	start := time.Now()
	fmt.Println("demo: starting the local stack (first run builds the tools; later runs take seconds)")
	s, err := stack.Up(ctx, stack.Options{BinDir: abs, Log: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	defer func() {
		fmt.Println("demo: stopping everything")
		if err := s.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: stop: %v\n", err)
		}
	}()
	bundle, what, err := demoBundle(ctx, s, aicrDir)
	if err == nil {
		err = s.ApplyDemo(ctx, bundle)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	d := stack.Demo{Name: "demo", What: what, BinDir: abs, Kubeconfig: s.Env.Kubeconfig, Timeout: timeout, Out: os.Stdout}
	rt, err := s.ShowRollout(ctx, d)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintf(os.Stderr, "demo: not ready: %v\n", err)
		fmt.Fprintf(os.Stderr, "demo: logs are in %s/logs\n", s.Dir)
		return 1
	}
	d.Ready(ctx, rt, start, check, fmt.Sprintf("ls %s/logs     # every process's log", s.Dir), "stop everything")
	return 0
}

// demoBundle is the bundle the demo rolls out and how to name it: the example GPU stack, or the
// AICR bundle folder dir imported into the stack's registry.
func demoBundle(ctx context.Context, s *stack.Stack, dir string) ([]byte, string, error) {
	if dir == "" {
		b, err := s.ExampleBundle("1.0.0")
		return b, fmt.Sprintf("gpu-stack 1.0.0 (%d components)", len(stack.ExampleComponents())), err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, "", fmt.Errorf("--bundle %s: an AICR bundle folder (what aicr bundle writes) is accepted", dir)
	}
	recipe := filepath.Join(abs, "recipe.yaml")
	if _, err := os.Stat(recipe); err != nil {
		recipe = ""
	}
	fmt.Printf("demo: importing the AICR bundle %s (kubectl aicr bundle import)\n", dir)
	imp, err := s.ImportAICR(ctx, abs, recipe)
	if err != nil {
		return nil, "", err
	}
	fmt.Print(imp.Report)
	return imp.Document, fmt.Sprintf("%s %s (%d components, imported from %s)", imp.Bundle.Metadata.Name, imp.Bundle.Metadata.Version, len(imp.Bundle.Components), dir), nil
}
