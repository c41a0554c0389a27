//go:build integration

package logstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// Named timeouts.
const (
	// readyTimeout bounds a binary's /readyz turning 200 and its first lease: seconds on an idle
	// machine, the rest is headroom for a loaded one.
	readyTimeout = 3 * time.Minute
	// stopTimeout bounds a clean exit after SIGTERM.
	stopTimeout = 30 * time.Second
)

// binary is one running binary whose output goes to a file.
type binary struct {
	name   string
	log    string
	health string
	cmd    *exec.Cmd
	exited chan error
}

// start runs a built binary with args at --log-level=debug (so klog's V(2) lines come too) and
// waits for its /readyz.
func start(t *testing.T, name string, args ...string) *binary {
	t.Helper()
	b := &binary{name: name, log: filepath.Join(t.TempDir(), name+".log"), health: servicetest.FreeAddr(t), exited: make(chan error, 1)}
	out, err := os.Create(b.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	t.Cleanup(func() { // after the kill below: the binaries are race-built
		for _, r := range servicetest.RaceReports([]byte(b.output())) {
			t.Errorf("DATA RACE in %s's output:\n%s", name, r)
		}
	})
	args = append(args, "--health-addr="+b.health, "--metrics-addr="+servicetest.FreeAddr(t), "--log-format=json", "--log-level=debug")
	b.cmd = exec.Command(filepath.Join(binDir, name), args...)
	b.cmd.Stdout, b.cmd.Stderr = out, out
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	t.Cleanup(func() { _ = b.cmd.Process.Kill() })
	err = testenv.WaitFor(t.Context(), readyTimeout, name+" ready", func(ctx context.Context) (bool, error) {
		select {
		case err := <-b.exited:
			b.exited <- err
			return false, fmt.Errorf("%s exited (%v); output:\n%s", name, err, b.output())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.health+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *binary) output() string {
	raw, _ := os.ReadFile(b.log)
	return string(raw)
}

// waitLine waits until the binary has written a line that has every field of want, failing at
// once on a line that is not JSON.
func (b *binary) waitLine(t *testing.T, what string, want map[string]string) {
	t.Helper()
	err := testenv.WaitFor(t.Context(), readyTimeout, b.name+": "+what, func(context.Context) (bool, error) {
		out := b.output()
		// Only whole lines: one still being written ends the output without its newline.
		out = out[:strings.LastIndexByte(out, '\n')+1]
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				if l != "" {
					t.Fatalf("%s wrote a line that is not JSON: %q", b.name, l)
				}
				continue
			}
			match := true
			for k, v := range want {
				s, _ := m[k].(string)
				match = match && strings.Contains(s, v)
			}
			if match {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, b.output())
	}
}

// stop sends SIGTERM and requires exit 0.
func (b *binary) stop(t *testing.T) {
	t.Helper()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.exited:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM", b.name, err)
		}
	case <-time.After(stopTimeout):
		t.Errorf("%s did not stop within %s of SIGTERM", b.name, stopTimeout)
	}
}

// servingCert writes a serving certificate for 127.0.0.1 (tlstest).
func servingCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	f, err := tlstest.Write(t.TempDir(), "aicr-admission")
	if err != nil {
		t.Fatal(err)
	}
	return f.ServerCert, f.ServerKey
}

// TestEveryLineIsJSON runs the five real binaries, the leader-elected three with --leader-elect,
// until each has written a klog line (leader election's "successfully acquired lease") and the
// webhook a standard library log line (net/http's TLS handshake error), stops them, and requires
// every line each wrote, start to exit, to be a JSON object with the binary's component, a level,
// a time and a message.
func TestEveryLineIsJSON(t *testing.T) {
	env := testenv.Current(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"aicr-system", "argocd"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	nats := natstest.Start(t)
	common := []string{"--nats-url=" + nats.URL, "--kubeconfig=" + env.Kubeconfig, "--namespace=aicr-system"}
	elect := []string{"--leader-elect", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}
	certFile, keyFile := servingCert(t)
	hook := servicetest.FreeAddr(t)

	bins := []*binary{
		start(t, "planner", append(append(common, elect...), "--operator-identities=aicr-operator", "--registry-repository=registry.example.com/aicr")...),
		start(t, "readiness", append(append(common, elect...), "--engine-namespace=argocd", "--engine-project=aicr", "--registry-repository=registry.example.com/aicr")...),
		start(t, "credrefresher", append(append(common, elect...), "--registry-auth=static",
			"--registry-repository=registry.example.com/aicr", "--engine-namespace=argocd", "--repo-creds-secret=aicr-registry")...),
		start(t, "applier", append(common, "--engine-namespace=argocd", "--engine-project=aicr", "--registry-repository=registry.example.com/aicr")...),
		start(t, "admission", append(common, "--tls-cert-file="+certFile, "--tls-key-file="+keyFile, "--webhook-addr="+hook,
			"--engine-namespace=argocd", "--operator-identities=aicr-operator")...),
	}
	for _, b := range bins[:3] {
		b.waitLine(t, "leader election's klog line", map[string]string{"source": "klog", "message": "successfully acquired lease aicr-system/aicr-" + b.name})
	}
	// A connection closed before the TLS handshake: net/http logs it with the standard library's log.
	conn, err := net.Dial("tcp", hook)
	if err != nil {
		t.Fatalf("dial the webhook: %v", err)
	}
	_ = conn.Close()
	bins[4].waitLine(t, "net/http's handshake error", map[string]string{"source": "stdlog", "message": "http: TLS handshake error"})

	for _, b := range bins {
		b.stop(t)
	}
	for _, b := range bins {
		out := b.output()
		n := 0
		for i, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Errorf("%s line %d is not JSON: %q", b.name, i+1, l)
				continue
			}
			n++
			for _, k := range []string{"level", "time", "message"} {
				if s, _ := m[k].(string); s == "" {
					t.Errorf("%s line %d has no %s: %q", b.name, i+1, k, l)
				}
			}
			if m["component"] != b.name {
				t.Errorf("%s line %d has component %v: %q", b.name, i+1, m["component"], l)
			}
		}
		if n < 3 {
			t.Errorf("%s wrote %d JSON lines, want its start, its work and its stop:\n%s", b.name, n, out)
		}
	}
}
