package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Marker files in an environment dir.
const (
	// ownerFile holds the PID of the test binary that created the dir.
	ownerFile = "owner"
	// keptFile marks a dir kept on purpose (AICR_KEEP_TESTENV); sweepStale leaves it alone.
	keptFile = "kept"
)

// sweepStale removes environment dirs in tmp left behind by test binaries that died without
// calling Stop (their processes died with them through Pdeathsig). Dirs that are kept on purpose,
// whose owner still runs, or that have no owner file yet are left alone.
func sweepStale(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, ent := range entries {
		if !ent.IsDir() || !strings.HasPrefix(ent.Name(), dirPrefix) {
			continue
		}
		dir := filepath.Join(tmp, ent.Name())
		if stale(dir) {
			_ = os.RemoveAll(dir)
		}
	}
}

func stale(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, keptFile)); err == nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	owner, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || owner <= 0 || processAlive(owner) {
		return false
	}
	// the owner is gone; so should its processes be, unless a PID was reused
	if procs, err := ReadPIDs(dir); err == nil {
		for _, p := range procs {
			if processAlive(p.PID) {
				return false
			}
		}
	}
	return true
}
