package stack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeNode is a chaos-stack node played by a shell script: it exits at start with line in its
// log for its first fails starts, then runs until killed and is healthy. It returns the stack
// and a function that counts the starts so far.
func fakeNode(t *testing.T, fails int, line string) (*Stack, func() int) {
	t.Helper()
	dir := t.TempDir()
	starts, ready := filepath.Join(dir, "starts"), filepath.Join(dir, "ready")
	script := `echo x >> "$1"
if [ "$(wc -l < "$1")" -le ` + strconv.Itoa(fails) + ` ]; then echo "$3"; exit 1; fi
touch "$2"
exec sleep 600`
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat(ready); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(health.Close)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{Dir: dir, procs: map[string]*exec.Cmd{}, exits: map[string]chan struct{}{}, log: io.Discard,
		opts: Options{Chaos: &ChaosOptions{nats: map[string]*natsNode{
			"nats-0": {args: []string{sh, "-c", script, "node", starts, ready, line}, health: health.URL},
		}}}}
	t.Cleanup(func() { _ = s.StopBinary("nats-0", true) })
	return s, func() int {
		data, _ := os.ReadFile(starts)
		return strings.Count(string(data), "\n")
	}
}

const bindFailure = "[ERR] Error listening on port: 127.0.0.1:4222, \"listen tcp 127.0.0.1:4222: bind: address already in use\""

// A node whose port was taken a moment is started again on the same ports until it binds.
func TestANodeThatCouldNotBindIsStartedAgain(t *testing.T) {
	s, starts := fakeNode(t, 2, bindFailure)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.StartNATS(ctx, "nats-0"); err != nil {
		t.Fatalf("StartNATS: %v", err)
	}
	if got := starts(); got != 3 {
		t.Fatalf("started %d times, want 3 (two bind failures, then up)", got)
	}
}

// Retries are bounded, and the error quotes how the node's log ends: the log goes with the
// stack's folder.
func TestANodeThatNeverBindsFailsWithItsLog(t *testing.T) {
	s, starts := fakeNode(t, 100, bindFailure)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.StartNATS(ctx, "nats-0")
	if err == nil {
		t.Fatal("StartNATS succeeded for a node that never binds")
	}
	if got := starts(); got != natsBindTries {
		t.Fatalf("started %d times, want %d", got, natsBindTries)
	}
	for _, want := range []string{"nats-0 exited before it was ready", "exit status 1", "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// Any other exit at start is not retried, and says why.
func TestANodeThatFailsOtherwiseIsNotStartedAgain(t *testing.T) {
	s, starts := fakeNode(t, 100, "nats-server: bad configuration: unknown field")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.StartNATS(ctx, "nats-0")
	if err == nil || !strings.Contains(err.Error(), "bad configuration: unknown field") {
		t.Fatalf("StartNATS: %v, want the node's last log line", err)
	}
	if got := starts(); got != 1 {
		t.Fatalf("started %d times, want 1", got)
	}
}
