// Command aicr-compose-demo is make compose-demo: the operator's docker-compose stack
// (deploy/compose, docs/compose.md) from images built on this machine (e2e/composestack), the
// example GPU-stack bundle rolled out and shown as kubectl aicr status --watch shows it, until
// Ready=True/RolledOut. With --check (make compose-demo-check) it then removes the stack
// (docker-compose down -v) and exits 0, or 1 with the blocking reason; without it, it leaves the
// stack running until Ctrl-C. --down removes a stack left running.
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

	"github.com/aicr-run/aicr-operator/e2e/composestack"
	"github.com/aicr-run/aicr-operator/e2e/stack"
)

func main() {
	binDir := flag.String("bin-dir", "bin", "folder holding kubectl-aicr (make build)")
	project := flag.String("project", "aicr-compose", "docker-compose's project name")
	check := flag.Bool("check", false, "once Ready (exit 0) or not (exit 1), remove the stack")
	down := flag.Bool("down", false, "remove a stack left running (docker-compose down -v) and exit")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long the rollout may take")
	flag.Parse()
	os.Exit(run(*binDir, *project, *check, *down, *timeout))
}

func run(binDir, project string, check, down bool, timeout time.Duration) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "compose-demo: %v\n", err)
		return 1
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return fail(err)
	}
	root, err := composestack.Root(ctx)
	if err != nil {
		return fail(err)
	}
	tools, err := composestack.BuildImages(ctx, root, os.Stdout)
	if err != nil {
		return fail(err)
	}
	o := composestack.Options{Project: project, Root: root, BinDir: abs, Tools: tools, Log: os.Stdout}
	if down {
		if err := composestack.DownProject(ctx, o); err != nil {
			return fail(err)
		}
		fmt.Println("compose-demo: removed")
		return 0
	}
	s, err := composestack.Up(ctx, o)
	if err != nil {
		if derr := composestack.DownProject(context.WithoutCancel(ctx), o); derr != nil {
			fmt.Fprintf(os.Stderr, "compose-demo: down: %v\n", derr)
		}
		return fail(err)
	}
	removeOnExit := check
	defer func() {
		if !removeOnExit {
			return
		}
		t0 := time.Now()
		if err := s.Down(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "compose-demo: down: %v\n", err)
			return
		}
		fmt.Printf("compose-demo: docker-compose down -v in %s; no container, network or volume of %s left\n", time.Since(t0).Round(100*time.Millisecond), project)
	}()
	bundle, err := s.ExampleBundle("1.0.0")
	if err == nil {
		err = s.ApplyDemo(ctx, bundle)
	}
	if err != nil {
		removeOnExit = true
		return fail(err)
	}
	d := stack.Demo{Name: "compose-demo", What: fmt.Sprintf("gpu-stack 1.0.0 (%d components)", len(stack.ExampleComponents())),
		BinDir: abs, Kubeconfig: s.Kubeconfig, Timeout: timeout, Out: os.Stdout}
	rt, err := s.ShowRollout(ctx, d)
	if err != nil {
		removeOnExit = true
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintf(os.Stderr, "compose-demo: not ready: %v\n", err)
		fmt.Fprintf(os.Stderr, "compose-demo: the containers' logs: docker-compose -p %s -f deploy/compose/docker-compose.yaml --profile %s logs\n", project, composestack.Profile)
		return 1
	}
	d.Ready(ctx, rt, start, check, fmt.Sprintf("docker-compose -p %s -f deploy/compose/docker-compose.yaml --profile %s ps", project, composestack.Profile),
		"remove the stack (docker-compose down -v); make compose-demo-down does it later")
	removeOnExit = true
	return 0
}
