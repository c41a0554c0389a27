package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// The kubeconfigs cluster writes into the shared volume.
const (
	// AdminKubeconfig is cluster-admin's (Argo CD and the demo's own steps use it).
	AdminKubeconfig = "kubeconfig"
	// apiServerName is the name the apiserver's serving certificate covers that the kubeconfigs
	// check, whatever address they dial (cluster:6443 inside, a published port outside).
	apiServerName = "localhost"
	// operatorNamespace is where the chart installs the binaries (their ServiceAccounts).
	operatorNamespace = "aicr-system"
)

// cluster starts the control plane and kwok with testenv (the same pinned tools and flags as
// the local stack; the apiserver on loopback), forwards :6443 to it, creates what Argo CD needs
// before it starts, and writes into the shared folder the admin kubeconfig for https://<name>:6443
// and one per binary impersonating its ServiceAccount, as the chart runs each binary. The admin
// kubeconfig is written last: the health check waits for it. It runs until SIGTERM.
func cluster(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	shared := fs.String("shared", "/shared", "the volume the kubeconfigs go to")
	listen := fs.String("listen", ":6443", "where the apiserver is forwarded")
	name := fs.String("name", "cluster", "the host name the other containers reach this one by")
	resync := fs.Duration("argocd-resync", 30*time.Second, "argocd-cm's timeout.reconciliation (the controller's --app-resync must match)")
	tools := fs.String("tools", "/usr/local/bin", "the folder of etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, f := range []string{AdminKubeconfig} {
		_ = os.Remove(filepath.Join(*shared, f)) // a restarted container starts a new cluster
	}
	env, err := testenv.Start(testenv.Options{Kwok: true, ToolsDir: *tools, Log: out, StartTimeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: stop: %v\n", err)
		}
	}()
	if err := env.PrepareArgoCD(ctx, *resync); err != nil {
		return err
	}
	target, err := url.Parse(env.APIServerURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	go forward(ln, target.Host)
	_, port, _ := net.SplitHostPort(*listen)
	server := "https://" + *name + ":" + port
	if err := writeKubeconfigs(env.Kubeconfig, *shared, server); err != nil {
		return err
	}
	fmt.Fprintf(out, "cluster: ready; %s/%s for %s (kwok node %s)\n", *shared, AdminKubeconfig, server, env.NodeName)
	<-ctx.Done()
	return nil
}

// writeKubeconfigs writes into shared one kubeconfig per binary, impersonating its
// ServiceAccount as the chart runs it, then the admin's (the one the health check waits for).
func writeKubeconfigs(from, shared, server string) error {
	for _, b := range v1alpha1.Binaries() {
		if err := writeKubeconfig(from, filepath.Join(shared, "kubeconfig-"+b), server, v1alpha1.ServiceAccountUser(operatorNamespace, b)); err != nil {
			return err
		}
	}
	return writeKubeconfig(from, filepath.Join(shared, AdminKubeconfig), server, "")
}

// writeKubeconfig writes from's kubeconfig, for server (its certificate checked as
// apiServerName) unless server is empty, impersonating user (with a ServiceAccount's groups) unless user is empty.
func writeKubeconfig(from, to, server, user string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		if server != "" {
			c.Server, c.TLSServerName = server, apiServerName
		}
	}
	if user != "" {
		for _, ai := range cfg.AuthInfos {
			ai.Impersonate = user
			ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"}
		}
	}
	tmp := to + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	// the binaries run as 65532 and read it; the volume is the stack's own
	if err := os.Chown(tmp, secretUID, secretUID); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// forward accepts connections on ln and copies each to and from target, until ln closes.
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer b.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
			<-done
		}()
	}
}

// importKubeconfig is profile "kind": the kubeconfigs of writeKubeconfigs from an external
// cluster's, its server as it is.
func importKubeconfig(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	from := fs.String("from", "/external/kubeconfig", "the external cluster's admin kubeconfig, its server reachable from the containers")
	shared := fs.String("shared", "/shared", "the volume the kubeconfigs go to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := writeKubeconfigs(*from, *shared, ""); err != nil {
		return err
	}
	fmt.Fprintf(out, "kubeconfig: %s imported into %s\n", *from, *shared)
	return nil
}

// wait returns once the kubeconfig exists and reaches a ready apiserver, or fails after timeout.
func wait(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "/shared/kubeconfig", "the kubeconfig to wait for")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var last error
	for {
		if _, err := os.Stat(*kubeconfig); err != nil {
			last = err
		} else if last = probe(ctx, []string{"kube", *kubeconfig}); last == nil {
			fmt.Fprintf(out, "wait: %s reaches a ready apiserver\n", *kubeconfig)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %w", *kubeconfig, *timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// probe is a container health check: "http URL" answers 200, "kube KUBECONFIG" reaches an
// apiserver whose /readyz says ok.
func probe(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: aicr-compose-node probe http URL | kube KUBECONFIG")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch args[0] {
	case "http":
		u, err := url.Parse(args[1])
		if err != nil || u.Scheme != "http" || (u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1") {
			return fmt.Errorf("probe http %q: want an http://localhost or http://127.0.0.1 URL, the container's own endpoint", args[1])
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil) //nolint:gosec // G704: a loopback URL from the compose file's health check, checked above
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req) //nolint:gosec // G704: as above
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d", args[1], resp.StatusCode)
		}
		return nil
	case "kube":
		cfg, err := clientcmd.BuildConfigFromFlags("", args[1])
		if err != nil {
			return err
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		body, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return err
		}
		if string(body) != "ok" {
			return fmt.Errorf("/readyz: %s", body)
		}
		return nil
	}
	return fmt.Errorf("probe %q: http and kube are accepted", args[0])
}
