package testenv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools writes shell scripts named like the tools into a folder.
func fakeTools(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A process that dies during start fails Start at once with its log, and leaves no dir behind.
func TestStartReportsAProcessThatExits(t *testing.T) {
	var log bytes.Buffer
	tools := fakeTools(t, map[string]string{
		"etcd":           "echo 'etcdmain: data dir is corrupt' >&2; exit 3",
		"kube-apiserver": "exit 0",
	})
	env, err := Start(Options{ToolsDir: tools, Log: &log})
	if err == nil {
		_ = env.Stop()
		t.Fatal("Start succeeded with an etcd that exits")
	}
	if errors.Is(err, ErrToolsMissing) {
		t.Fatalf("Start = %v, want a start failure, not missing tools", err)
	}
	for _, want := range []string{"start etcd", "etcd exited", "exit status 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(log.String(), "data dir is corrupt") {
		t.Errorf("log lacks the tail of etcd's output:\n%s", log.String())
	}
	if dir := dirOf(err.Error()); dir != "" {
		if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
			t.Errorf("dir %s left behind after a failed start", dir)
		}
	}
}

// A port taken between FreePort and the bind makes Start try again with new ports.
func TestStartRetriesWhenAPortWasTaken(t *testing.T) {
	var log bytes.Buffer
	tools := fakeTools(t, map[string]string{
		"etcd":           "echo 'listen tcp 127.0.0.1:2379: bind: address already in use' >&2; exit 1",
		"kube-apiserver": "exit 0",
	})
	_, err := Start(Options{ToolsDir: tools, Log: &log})
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("Start = %v, want an address-in-use failure", err)
	}
	if got := strings.Count(log.String(), "retrying"); got != maxStartAttempts-1 {
		t.Errorf("%d retries logged, want %d:\n%s", got, maxStartAttempts-1, log.String())
	}
}

// dirOf extracts the "(dir /tmp/...)" part of a start error.
func dirOf(msg string) string {
	_, rest, ok := strings.Cut(msg, "(dir ")
	if !ok {
		return ""
	}
	dir, _, _ := strings.Cut(rest, ")")
	return dir
}

// Without AICR_REQUIRE_TOOLS, missing tools skip the test that asked for an environment.
func TestStartTSkipsWhenToolsAreMissing(t *testing.T) {
	t.Setenv(EnvRequireTools, "")
	skipped := false
	t.Run("needs an environment", func(t *testing.T) {
		t.Cleanup(func() { skipped = t.Skipped() })
		StartT(t, Options{ToolsDir: t.TempDir()})
		t.Error("StartT returned without tools")
	})
	if !skipped {
		t.Error("test was not skipped")
	}
}
