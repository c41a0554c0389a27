package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shellReadyTimeout is how long a test shell gets to write its marker file.
const shellReadyTimeout = 10 * time.Second

func TestPIDsFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := []Process{
		{Name: ProcEtcd, PID: 101, Log: filepath.Join(dir, "logs", "etcd.log")},
		{Name: ProcAPIServer, PID: 202, Log: filepath.Join(dir, "logs", "kube-apiserver.log")},
	}
	if err := writePIDs(filepath.Join(dir, pidsFile), want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pids (-want +got):\n%s", diff)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, pidsFile))
	if string(raw) != "etcd 101\nkube-apiserver 202\n" {
		t.Errorf("pids file = %q, want one \"name pid\" line per process", raw)
	}
}

func TestReadPIDsRejectsMalformedFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		content string
		wantErr string
	}{
		"three fields":     {content: "etcd 1 extra\n", wantErr: "line 1"},
		"pid not a number": {content: "etcd 1\nkube-apiserver x\n", wantErr: "line 2: bad pid"},
		"pid zero":         {content: "etcd 0\n", wantErr: "bad pid"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, pidsFile), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadPIDs(dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ReadPIDs error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// waitFile waits until a test shell has written path.
func waitFile(t *testing.T, path string) {
	t.Helper()
	err := WaitFor(context.Background(), shellReadyTimeout, "file "+filepath.Base(path), func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "child")
	p, err := startProc(procSpec{name: "shell", path: "/bin/sh", args: []string{"-c", "sleep 300 & echo $! > " + marker + ".tmp && mv " + marker + ".tmp " + marker + "; wait"}}, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, marker)
	raw, _ := os.ReadFile(marker)
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("child pid %q: %v", raw, err)
	}
	pid := p.cmd.Process.Pid
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("process group of %d = %d (%v), want its own", pid, pgid, err)
	}
	killed, err := p.stop(stopGracePeriod)
	if err != nil || killed {
		t.Fatalf("stop = killed %v, %v; want a clean SIGTERM stop", killed, err)
	}
	if processAlive(pid) {
		t.Errorf("process %d still alive after stop", pid)
	}
	// the child is not ours to reap: it is gone once init reaped it
	err = WaitFor(context.Background(), shellReadyTimeout, "child gone", func(context.Context) (bool, error) {
		return !processAlive(child), nil
	})
	if err != nil {
		t.Errorf("child %d of the process group survived stop: %v", child, err)
	}
	if !strings.Contains(string(TailFile(p.logPath, 5)), "### ") {
		t.Errorf("log %s lacks the command header", p.logPath)
	}
}

func TestStopKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ready")
	p, err := startProc(procSpec{name: "stubborn", path: "/bin/sh", args: []string{"-c", "trap '' TERM; touch " + marker + "; while :; do sleep 1; done"}}, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, marker)
	killed, err := p.stop(200 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !killed {
		t.Error("stop reported a clean stop for a process ignoring SIGTERM")
	}
	if !p.exited() {
		t.Error("process not reaped after stop")
	}
}

func TestExitErrorRecognisesATakenPort(t *testing.T) {
	dir := t.TempDir()
	p, err := startProc(procSpec{name: "server", path: "/bin/sh", args: []string{"-c", "echo 'listen tcp 127.0.0.1:1234: bind: address already in use' >&2; exit 1"}}, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := p.exitError(); !errors.Is(err, errAddrInUse) {
		t.Errorf("exitError = %v, want it to wrap errAddrInUse", err)
	}
}

func TestTailFileKeepsTheLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := string(TailFile(path, 3)), "line 97\nline 98\nline 99\n"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
	if TailFile(filepath.Join(t.TempDir(), "missing"), 3) != nil {
		t.Error("tail of a missing file is not nil")
	}
}
