// Command aicr-compose-demo is make compose-demo: the docs/compose.md walk-through, scripted, for a
// machine with Docker. It takes the no-Docker demo's steps (make demo) with Docker's tools: it
// builds the images, creates a kind cluster, installs Argo CD v3.4.2, runs an OCI registry
// container on kind's network and pushes the example charts to it, creates the repo-creds Secret,
// the repository Secrets and the bundle with the pushed digests, starts NATS and the five binaries
// with docker-compose, applies the ClusterRuntime and waits for Ready. --dry-run prints the
// commands and writes the generated files without running anything; --down removes it all.
package main

import (
	"context"
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
	dry := flag.Bool("dry-run", false, "print the commands and write the generated files; run nothing")
	down := flag.Bool("down", false, "stop docker-compose, remove the registry container and delete the kind cluster")
	cluster := flag.String("cluster", "aicr", "the kind cluster's name")
	port := flag.Int("registry-port", 5001, "host port of the registry container (127.0.0.1)")
	timeout := flag.Duration("timeout", 15*time.Minute, "how long the rollout may take")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dry, *down, *cluster, *port, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "compose-demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dry, down bool, cluster string, port int, timeout time.Duration) error {
	charts, err := stack.ChartsDir()
	if err != nil {
		return err
	}
	root := filepath.Dir(filepath.Dir(charts))
	work := filepath.Join(root, "deploy", "compose", ".demo")
	pw, err := registryPassword(work)
	if err != nil {
		return err
	}
	d := &demo{cfg: Config{Cluster: cluster, RegistryName: "aicr-registry", RegistryPort: port, RegistryUser: "aicr", RegistryPassword: pw},
		root: root, work: work, timeout: timeout, r: execRunner{root: root}, out: os.Stdout}
	if dry {
		d.r = dryRunner{w: os.Stdout}
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if down {
		return d.down(ctx)
	}
	start := time.Now()
	if err := d.Run(ctx); err != nil {
		return err
	}
	if !dry {
		fmt.Printf("compose-demo: Ready in %s; kubectl --kubeconfig %s get applications -n argocd; %s --down removes it all\n",
			time.Since(start).Round(time.Second), d.hostKubeconfig(), "make compose-demo-down")
	}
	return nil
}
