package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Names of the processes an environment may run, as used in <Dir>/pids, the log file names
// (<Dir>/logs/<name>.log) and Env.StopProcess / Env.StartProcess.
const (
	ProcEtcd              = "etcd"
	ProcAPIServer         = "kube-apiserver"
	ProcControllerManager = "kube-controller-manager"
	ProcScheduler         = "kube-scheduler"
	ProcKwok              = "kwok"
	ProcRegistry          = "registry"
	ProcRedis             = "redis"
	ProcRepoServer        = "argocd-repo-server"
	ProcAppController     = "argocd-application-controller"
)

const (
	// stopGracePeriod is how long a process gets between SIGTERM and SIGKILL.
	stopGracePeriod = 10 * time.Second
	// killWaitTimeout is how long Stop waits for a process to be reaped after SIGKILL.
	killWaitTimeout = 5 * time.Second
	// logTailLines is how much of each log a start failure prints.
	logTailLines = 40
)

// pidsFile is the name of the file in Dir that lists "name pid" per running process, so a left
// behind environment can be stopped from a shell.
const pidsFile = "pids"

// Process is one running process of an environment.
type Process struct {
	Name string
	PID  int
	// Log is the file the process's stdout and stderr go to.
	Log string
}

// procSpec is how to (re)start one process.
type procSpec struct {
	name string
	path string
	args []string
	// env is added to the inherited environment (later entries win).
	env []string
	dir string
}

// proc is a started process.
type proc struct {
	spec    procSpec
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	started time.Time
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // set before done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended, with a hint when it could not bind its port.
func (p *proc) exitError() error {
	err := fmt.Errorf("%s exited: %v", p.spec.name, p.waitErr)
	if AddrInUse(TailFile(p.logPath, logTailLines)) {
		return fmt.Errorf("%w (%w)", err, errAddrInUse)
	}
	return err
}

// AddrInUse reports whether the end of a process's log says it could not bind a port because
// something else held it: the start failure worth another try.
func AddrInUse(logTail []byte) bool {
	return bytes.Contains(logTail, []byte("address already in use"))
}

// errAddrInUse marks a start failure caused by a port taken between FreePort and the bind; Start
// retries those with new ports.
var errAddrInUse = errors.New("address already in use")

// inheritedEnv is the environment a child starts from: the test's, minus variables that would
// point a child at the developer's own cluster, Argo CD or Helm state.
func inheritedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || strings.HasPrefix(k, "ARGOCD_") || strings.HasPrefix(k, "HELM_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// startProc starts spec in its own process group with its output in logDir/<name>.log. With
// deathSignal, the kernel SIGKILLs the process when the test binary dies without calling Stop
// (go test's -timeout, a crash): the environment never outlives its test.
func startProc(spec procSpec, logDir string, deathSignal bool) (*proc, error) {
	logPath := filepath.Join(logDir, spec.name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", spec.name, err)
	}
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = append(inheritedEnv(), spec.env...)
	cmd.Dir = spec.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if deathSignal {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	fmt.Fprintf(logFile, "### %s: %s %s\n", time.Now().Format(time.RFC3339Nano), spec.path, strings.Join(spec.args, " "))
	if err := spawn(cmd, deathSignal); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &proc{spec: spec, cmd: cmd, logPath: logPath, logFile: logFile, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// spawner starts processes from one goroutine locked to its OS thread for the life of the test
// binary. Pdeathsig fires when the *thread* that forked the child exits, and the Go runtime ends
// threads whose locked goroutine returns; forking from a thread that never ends makes Pdeathsig
// mean "when the test binary dies".
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func spawn(cmd *exec.Cmd, lockedThread bool) error {
	if !lockedThread {
		return cmd.Start()
	}
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this goroutine and its thread live forever
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

// stop ends the process group: SIGTERM, then SIGKILL after grace. It returns once the process has
// been reaped (or the kill wait timed out); killed reports that SIGTERM was not enough.
func (p *proc) stop(grace time.Duration) (killed bool, err error) {
	defer func() { _ = p.logFile.Close() }()
	if p.exited() {
		return false, nil
	}
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("signal %s: %w", p.spec.name, err)
	}
	select {
	case <-p.done:
		return false, nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return true, fmt.Errorf("kill %s: %w", p.spec.name, err)
	}
	select {
	case <-p.done:
		return true, nil
	case <-time.After(killWaitTimeout):
		return true, fmt.Errorf("stop %s: pid %d not reaped %s after SIGKILL", p.spec.name, pgid, killWaitTimeout)
	}
}

// writePIDs writes the "name pid" lines of procs to path, replacing it atomically.
func writePIDs(path string, procs []Process) error {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "%s %d\n", p.Name, p.PID)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write pids: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write pids: %w", err)
	}
	return nil
}

// ReadPIDs reads the pids file of an environment directory (<dir>/pids), in start order. It lets a
// test or a script find the processes of an environment it did not start.
func ReadPIDs(dir string) ([]Process, error) {
	f, err := os.Open(filepath.Join(dir, pidsFile))
	if err != nil {
		return nil, fmt.Errorf("read pids: %w", err)
	}
	defer f.Close()
	var out []Process
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("read pids: line %d: want \"name pid\", got %q", line, sc.Text())
		}
		pid, err := strconv.Atoi(fields[1])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("read pids: line %d: bad pid %q", line, fields[1])
		}
		out = append(out, Process{Name: fields[0], PID: pid, Log: filepath.Join(dir, "logs", fields[0]+".log")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read pids: %w", err)
	}
	return out, nil
}

// processAlive reports whether pid exists (kill(pid, 0) succeeds or is refused for permission).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// TailFile returns the last n lines of path (nil if it cannot be read): what a start failure
// quotes of a process's log.
func TailFile(path string, n int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const maxRead = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		if _, err := f.Seek(st.Size()-maxRead, io.SeekStart); err != nil {
			return nil
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return append(bytes.Join(lines, []byte("\n")), '\n')
}
