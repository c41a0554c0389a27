package app

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

const (
	// startTimeout bounds the binary becoming ready or answering a command.
	startTimeout = 30 * time.Second
	// stopTimeout bounds a clean exit after cancel.
	stopTimeout = 20 * time.Second
)

// fakeAPIServer answers /readyz and 404s everything else (so a plan lookup finds no plan); it
// returns a kubeconfig for it and counts plan lookups.
func fakeAPIServer(t *testing.T, planGets *atomic.Int32) string {
	t.Helper()
	return servicetest.FakeAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/readyz":
			_, _ = io.WriteString(w, "ok")
			return
		case strings.Contains(r.URL.Path, "/configmaps/aicr-plan-"):
			planGets.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`)
	})
}

func readyz(addr string) (int, string, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// start runs Main in the background and returns its exit channel.
func start(ctx context.Context, t *testing.T, args []string) (<-chan int, *bytes.Buffer) {
	t.Helper()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() { exit <- Main(ctx, args, &stderr) }()
	return exit, &stderr
}

func waitExit(t *testing.T, exit <-chan int, stderr *bytes.Buffer) {
	t.Helper()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit code %d; want 0 (stderr: %s)", code, stderr.String())
		}
	case <-time.After(stopTimeout):
		t.Fatalf("no exit within %s after cancel", stopTimeout)
	}
}

// TestBinaryStartsAnswersAndStopsCleanly runs the binary against an in-process NATS that
// requires TLS, under its own NATS identity, and a fake API server: /readyz turns ready, a
// command is consumed from the work queue the planner's identity declared and answered on the
// applied subject, and cancelling the context exits 0.
func TestBinaryStartsAnswersAndStopsCleanly(t *testing.T) {
	ns := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	var planGets atomic.Int32
	health := servicetest.FreeAddr(t)
	args := []string{"--nats-url=" + ns.URL, "--nats-user=" + v1alpha1.BinaryApplier, "--nats-password-file=" + ns.PasswordFiles[v1alpha1.BinaryApplier],
		"--nats-tls-ca=" + ns.TLS.CA, "--kubeconfig=" + fakeAPIServer(t, &planGets), "--health-addr=" + health,
		"--metrics-addr=", "--registry-repository=registry.example.com/aicr", "--workers=2", "--log-level=warn"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	exit, stderr := start(ctx, t, args)

	servicetest.Poll(t, startTimeout, "/readyz", func() error {
		code, body, err := readyz(health)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	// The planner's identity declares the streams and the applier's consumer; the applier binds.
	_, js := ns.ConnectAs(t, v1alpha1.BinaryPlanner)
	if _, err := dispatch.EnsureSetup(t.Context(), js, 1); err != nil {
		t.Fatalf("the planner's stream setup: %v", err)
	}
	cmd := bus.NewApplyCommand("cluster", "uid-1", bus.StepRef{Rollout: "r1", Index: 1, ID: "r1/1", Started: time.Now()}, "gpu-operator",
		v1alpha1.ActionInstall, "sha256:"+strings.Repeat("a", 64), false, nil)
	if err := bus.NewPublisher(js, "test").Publish(t.Context(), bus.ApplySubject("cluster", "gpu-operator"), "r1/1/1", cmd); err != nil {
		t.Fatalf("publish command: %v", err)
	}
	var got bus.ApplyResult
	_, observer := ns.Connect(t)
	servicetest.Poll(t, startTimeout, "the command's result", func() error {
		stream, err := observer.Stream(t.Context(), bus.StreamEvents)
		if err != nil {
			return err
		}
		msg, err := stream.GetLastMsgForSubject(t.Context(), bus.AppliedSubject("cluster", "gpu-operator"))
		if err != nil {
			return err
		}
		if id := msg.Header.Get(jetstream.MsgIDHeader); id != "r1/1/1/result" {
			return fmt.Errorf("message ID %q", id)
		}
		return json.Unmarshal(msg.Data, &got)
	})
	if got.Outcome != bus.OutcomeFailed || got.Reason != bus.ResultReasonPlanUnreadable || got.CommandID != "r1/1/1" || got.Step.ID != "r1/1" {
		t.Errorf("result = %+v; want Failed/%s for command r1/1/1", got, bus.ResultReasonPlanUnreadable)
	}
	if planGets.Load() == 0 {
		t.Errorf("the plan was never looked up")
	}

	cancel()
	waitExit(t, exit, stderr)
}

// TestBinaryWithoutNATSStaysNotReady: with NATS unreachable the binary keeps running, /readyz
// says why it is not ready, and cancelling still exits 0.
func TestBinaryWithoutNATSStaysNotReady(t *testing.T) {
	var planGets atomic.Int32
	health := servicetest.FreeAddr(t)
	unreachable := "nats://" + servicetest.FreeAddr(t) // nothing listens there
	args := []string{"--nats-url=" + unreachable, "--kubeconfig=" + fakeAPIServer(t, &planGets), "--health-addr=" + health,
		"--metrics-addr=", "--registry-repository=registry.example.com/aicr", "--log-level=error"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	exit, stderr := start(ctx, t, args)

	var body string
	servicetest.Poll(t, startTimeout, "/readyz answering", func() error {
		code, b, err := readyz(health)
		if err != nil {
			return err
		}
		body = b
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("status %d %s; want 503", code, b)
		}
		return nil
	})
	if !strings.Contains(body, "nats") {
		t.Errorf("/readyz body %q does not name nats", body)
	}
	// Ask a few more times: still running, still not ready.
	for i := range 5 {
		select {
		case code := <-exit:
			t.Fatalf("binary exited with %d while NATS was unreachable (stderr: %s)", code, stderr.String())
		default:
		}
		code, b, err := readyz(health)
		if err != nil || code != http.StatusServiceUnavailable {
			t.Fatalf("probe %d: %d %s %v; want 503", i, code, b, err)
		}
	}
	cancel()
	waitExit(t, exit, stderr)
}

func TestValidateNamesTheFlag(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"no registry repository": {
			want: "--registry-repository is required",
		},
		"a registry repository with a trailing slash": {
			args: []string{"--registry-repository=registry.example.com/aicr/"},
			want: `--registry-repository "registry.example.com/aicr/": use host[:port]/path without a trailing slash`,
		},
		"a registry repository of another scheme": {
			args: []string{"--registry-repository=https://registry.example.com/aicr"},
			want: "only oci:// is supported",
		},
		"an engine namespace that is no namespace name": {
			args: []string{"--registry-repository=r.example.com/a", "--engine-namespace=Argo_CD"},
			want: `--engine-namespace "Argo_CD"`,
		},
		"no workers": {
			args: []string{"--registry-repository=r.example.com/a", "--workers=0"},
			want: "--workers 0: use 1 to 256",
		},
		"client-go's default rate limits are not what we run with": {
			args: []string{"--registry-repository=r.example.com/a", "--kube-qps=0"},
			want: "--kube-qps and --kube-burst must be positive",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(t.Context(), tc.args, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			var line struct{ Level, Error string }
			if err := json.Unmarshal(stderr.Bytes(), &line); err != nil {
				t.Fatalf("stderr %q is not one JSON line: %v", stderr.String(), err)
			}
			if line.Level != "error" || !strings.Contains(line.Error, tc.want) {
				t.Errorf("exit line %q does not say %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--registry-repository=registry.example.com/aicr"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	got := fmt.Sprintf("%s %s %d %v %d", o.EngineNamespace, o.EngineProject, o.Workers, o.KubeQPS, o.KubeBurst)
	if want := "argocd aicr 8 1000 2000"; got != want {
		t.Errorf("defaults = %q, want %q", got, want)
	}
}
