package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// deadPID returns the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestSweepStaleRemovesOnlyAbandonedDirs(t *testing.T) {
	tmp := t.TempDir()
	dead := deadPID(t)
	mk := func(name string, owner int, kept bool) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner > 0 {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if kept {
			if err := os.WriteFile(filepath.Join(dir, keptFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for name, tc := range map[string]struct {
		dir      string
		wantGone bool
	}{
		"owner dead":             {dir: mk(dirPrefix+"abandoned", dead, false), wantGone: true},
		"owner alive":            {dir: mk(dirPrefix+"live", os.Getpid(), false)},
		"kept on purpose":        {dir: mk(dirPrefix+"kept", dead, true)},
		"no owner file yet":      {dir: mk(dirPrefix+"starting", 0, false)},
		"not an environment dir": {dir: mk("something-else", dead, false)},
	} {
		t.Run(name, func(t *testing.T) {
			sweepStale(tmp)
			_, err := os.Stat(tc.dir)
			if gone := os.IsNotExist(err); gone != tc.wantGone {
				t.Errorf("dir gone = %v, want %v", gone, tc.wantGone)
			}
		})
	}
}
