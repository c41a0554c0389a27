// Command aicr-compose-node is the program of the compose stack's own containers
// (deploy/compose/docker-compose.yaml, docs/compose.md), in every image make compose-demo builds
// from the local stack's tools:
//
//	aicr-compose-node init --dir /secrets     the NATS, webhook and registry secrets and configs, once
//	aicr-compose-node cluster --shared /shared etcd, kube-apiserver, -controller-manager, -scheduler
//	                                          and kwok (testkit/testenv), the apiserver on :6443,
//	                                          kubeconfigs in /shared, until SIGTERM
//	aicr-compose-node kubeconfig --from F      profile kind: the same kubeconfigs from an external one
//	aicr-compose-node wait --kubeconfig F      until F reaches a ready apiserver
//	aicr-compose-node probe http URL | kube KUBECONFIG    a health check: exit 0 when it answers
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "aicr-compose-node: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: aicr-compose-node init|cluster|kubeconfig|wait|probe [flags]")
	}
	switch args[0] {
	case "init":
		return initSecrets(args[1:], out)
	case "cluster":
		return cluster(ctx, args[1:], out)
	case "kubeconfig":
		return importKubeconfig(args[1:], out)
	case "wait":
		return wait(ctx, args[1:], out)
	case "probe":
		return probe(ctx, args[1:])
	}
	return fmt.Errorf("unknown command %q: init, cluster, kubeconfig, wait and probe are accepted", args[0])
}
