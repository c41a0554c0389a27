//go:build benchargocd

package benchargocd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// cpuGroups are the processes a run's CPU is split by: what the operator costs Argo CD on the
// same cores.
var cpuGroups = []string{"operator", "kube-apiserver + etcd", "Argo CD", "kwok + controllers", "bench (NATS, watch, floor)"}

// cpuSample is each group's CPU clock ticks (10 ms) at one moment.
type cpuSample map[string]int64

// sampleCPU reads the CPU time of the operator's binaries (the processes running a file of the
// bin folder), of the environment's processes by group, and of this process (the embedded NATS
// server, the watch and the floor loop).
func sampleCPU(binDir string) cpuSample {
	out := cpuSample{}
	for _, p := range st.Env.Processes() {
		t, _ := ticks(p.PID)
		switch p.Name {
		case testenv.ProcAPIServer, testenv.ProcEtcd:
			out["kube-apiserver + etcd"] += t
		case testenv.ProcAppController, testenv.ProcRepoServer, testenv.ProcRedis:
			out["Argo CD"] += t
		default:
			out["kwok + controllers"] += t
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || filepath.Dir(exe) != filepath.Clean(binDir) {
			continue
		}
		t, _ := ticks(pid)
		out["operator"] += t
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out["bench (NATS, watch, floor)"] += (ru.Utime.Nano() + ru.Stime.Nano()) / 1e7
	}
	return out
}

// since is each group's CPU seconds from before to s.
func (s cpuSample) since(before cpuSample) map[string]float64 {
	out := map[string]float64{}
	for _, g := range cpuGroups {
		out[g] = float64(s[g]-before[g]) / 100
	}
	return out
}

// ticks is the process's user plus system time in clock ticks (/proc/<pid>/stat).
func ticks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable cpu times in /proc/%d/stat", pid)
	}
	return u + s, nil
}
