package service

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// MemoryLimitShare is the share of the container's memory limit the Go runtime is asked to stay
// under (its soft memory limit, GOMEMLIMIT). Below the limit the collector runs as GOGC says;
// near it, it collects more often instead of letting the heap grow to twice what is live, which
// is how a readiness watching 10 000 Applications with large values stays inside its limit
// instead of being killed. The rest is headroom for what the runtime does not count.
const MemoryLimitShare = 0.9

// cgroupLimitFiles are where a container's memory limit is read: cgroup v2, then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// unlimited is the smallest value cgroup v1 reports for "no limit" (a page-rounded MaxInt64).
const unlimited = 1 << 62

// MemoryLimit is the soft memory limit a binary runs with and where it came from.
type MemoryLimit struct {
	// Bytes is the limit; 0 when none is set.
	Bytes int64
	// Source is "GOMEMLIMIT" (set by the environment, left as the runtime read it), the cgroup
	// file it was computed from, or "" when there is none.
	Source string
}

// memoryLimit decides the soft memory limit: the environment's GOMEMLIMIT when set (the runtime
// has applied it already), else MemoryLimitShare of the first cgroup memory limit found, else
// none. A file that is missing is skipped; one that cannot be read or parsed is an error naming
// it, and no limit is set.
func memoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) (MemoryLimit, error) {
	if getenv("GOMEMLIMIT") != "" {
		return MemoryLimit{Source: "GOMEMLIMIT"}, nil
	}
	for _, path := range cgroupLimitFiles {
		raw, err := readFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return MemoryLimit{}, fmt.Errorf("read the container's memory limit from %s: %w", path, err)
		}
		s := string(bytes.TrimSpace(raw))
		if s == "max" {
			return MemoryLimit{}, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return MemoryLimit{}, fmt.Errorf("read the container's memory limit from %s: %q is not a number of bytes or \"max\"", path, s)
		}
		if n >= unlimited {
			return MemoryLimit{}, nil
		}
		return MemoryLimit{Bytes: int64(math.Floor(float64(n) * MemoryLimitShare)), Source: path}, nil
	}
	return MemoryLimit{}, nil
}

// applyMemoryLimit sets the runtime's soft memory limit from the container's (memoryLimit) and
// reports what it runs with.
func applyMemoryLimit() (MemoryLimit, error) {
	l, err := memoryLimit(os.Getenv, os.ReadFile)
	if err != nil {
		return l, err
	}
	switch {
	case l.Source == "GOMEMLIMIT":
		l.Bytes = debug.SetMemoryLimit(-1) // read, unchanged
	case l.Bytes > 0:
		debug.SetMemoryLimit(l.Bytes)
	}
	return l, nil
}
