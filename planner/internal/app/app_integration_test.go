//go:build integration

package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

const (
	// readyTimeout bounds the wait for /readyz.
	readyTimeout = time.Minute
	// exitTimeout bounds a clean exit after cancel.
	exitTimeout = 30 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

func options(t *testing.T, env *testenv.Env, natsURL string) (Options, string) {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	o.BindFlags(fs)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := fs.Parse([]string{"--kubeconfig", env.Kubeconfig, "--nats-url", natsURL, "--health-addr", addr, "--metrics-addr", "", "--namespace", "aicr-system", "--log-level", "warn", "--registry-repository", "registry.example.com/aicr"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o, "http://" + addr + "/readyz"
}

func readyz(ctx context.Context, url string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func run(o Options) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	return cancel, done
}

func waitExit(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want a clean exit", err)
		}
	case <-time.After(exitTimeout):
		t.Fatalf("Run did not return within %s of cancel", exitTimeout)
	}
}

func TestBinaryStartsReadyAndStopsCleanly(t *testing.T) {
	env := testenv.Current(t)
	srv := natstest.Start(t)
	o, url := options(t, env, srv.URL)
	cancel, done := run(o)
	err := testenv.WaitFor(context.Background(), readyTimeout, "planner /readyz 200", func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("planner exited: %v", err)
		default:
		}
		code, err := readyz(ctx, url)
		return code == http.StatusOK, err
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	waitExit(t, cancel, done)
}

func TestBinaryWithoutNATSStaysNotReady(t *testing.T) {
	env := testenv.Current(t)
	port, err := testenv.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	o, url := options(t, env, fmt.Sprintf("nats://127.0.0.1:%d", port))
	cancel, done := run(o)
	// The health server answers, and keeps answering 503, while the planner waits for NATS.
	notReady := 0
	err = testenv.WaitFor(context.Background(), readyTimeout, "three 503 answers from /readyz", func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("planner exited without NATS: %v", err)
		default:
		}
		code, err := readyz(ctx, url)
		if err != nil {
			return false, err
		}
		if code == http.StatusOK {
			return false, fmt.Errorf("/readyz is 200 without NATS")
		}
		notReady++
		return notReady >= 3, nil
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	waitExit(t, cancel, done)
}
