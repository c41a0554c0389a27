package toolcache

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runTimeout bounds one run of hack/tools.sh with fake builds (each takes well under a second
// unless a test holds it at a gate).
const runTimeout = 60 * time.Second

// fakeRecipes replace the real fetch and build of etcd and helm: each prints the kind of noise
// go prints, may wait at a gate (a file in $FAKE_GATE the test creates once it has seen what it
// wants on the screen), and leaves an executable that prints its name.
const fakeRecipes = `
gate() {
  [ -n "${FAKE_GATE:-}" ] || return 0
  local i=0
  while [ ! -e "$FAKE_GATE/$1" ]; do
    sleep 0.05; i=$((i + 1))
    [ "$i" -lt 600 ] || { echo "no go-ahead for $1"; return 1; }
  done
}
build_std() { echo "compiled the standard library"; }
fake_bin() { printf '#!/bin/sh\necho %s\n' "$1" >"$d/bin.tmp/$1"; chmod +x "$d/bin.tmp/$1"; }
fetch_etcd() { echo "go: downloading go.etcd.io/etcd/server/v3 v3.6.16"; gate fetch-etcd; }
build_etcd() { gate build-etcd; fake_bin etcd; }
fetch_helm() { echo "go: downloading helm.sh/helm/v3 v3.19.5"; }
build_helm() {
  if [ -n "${FAKE_FAIL:-}" ]; then echo "boom: helm does not compile"; exit 3; fi
  fake_bin helm
}
`

// toolsRun is one run of hack/tools.sh against a temporary cache.
type toolsRun struct {
	cache, gate string
	env         []string
}

func newRun(t *testing.T) *toolsRun {
	t.Helper()
	dir := t.TempDir()
	r := &toolsRun{cache: filepath.Join(dir, "cache"), gate: filepath.Join(dir, "gate")}
	recipes := filepath.Join(dir, "recipes.sh")
	if err := os.WriteFile(recipes, []byte(fakeRecipes), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.gate, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AICR_TOOLS_") && !strings.HasPrefix(kv, "TERM=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "AICR_TOOLS_CACHE="+r.cache, "AICR_TOOLS_RECIPES="+recipes)
	return r
}

// open opens the gate name: the fake build waiting there goes on.
func (r *toolsRun) open(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.gate, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// command is hack/tools.sh with args, stdout into stdout, stderr into stderr.
func (r *toolsRun) command(t *testing.T, stdout, stderr io.Writer, extraEnv []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "hack", "tools.sh")}, args...)...)
	cmd.Env = append(append([]string{}, r.env...), extraEnv...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd
}

// screen collects what a process writes, safe to read while it writes.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// process is a started hack/tools.sh.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it exited; err is its result
	err    error
}

func start(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait waits for the process with a deadline and returns its error.
func (p *process) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(runTimeout):
		t.Fatalf("hack/tools.sh did not finish within %s", runTimeout)
		return nil
	}
}

// waitFor polls the screen until re matches; it fails the test at the deadline or when p exited
// without printing it.
func (s *screen) waitFor(t *testing.T, p *process, re *regexp.Regexp, what string) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for !re.MatchString(s.String()) {
		select {
		case <-p.exited:
			if re.MatchString(s.String()) {
				return
			}
			t.Fatalf("hack/tools.sh exited (%v) without a %s (want %s); got:\n%q", p.err, what, re, s.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s on the screen within %s (want %s); got:\n%q", what, runTimeout, re, s.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	doneLine = regexp.MustCompile(`^\[tools\] ([0-9]+)/([0-9]+) (\S+) done in [0-9]+s; [0-9]+s elapsed`)
	allDone  = regexp.MustCompile(`^\[tools\] all ([0-9]+) done in [0-9]+s$`)
	logLine  = regexp.MustCompile(`^\[tools\] build output \(go: downloading \.\.\.\) goes to (\S+)/$`)
)

// Without a terminal: plain lines only, an estimate from the times an earlier build recorded, a
// status line now and then, one line per finished job, the go noise only in the log; the second
// run builds nothing and prints nothing.
func TestPlainLinesWithoutATerminal(t *testing.T) {
	r := newRun(t)
	if err := os.MkdirAll(r.cache, 0o755); err != nil {
		t.Fatal(err)
	}
	times := "etcd-v3.6.16:etcd 100\nhelm-v3.19.5:helm 200\nwith:binaries 60\nwith:stdlib 40\n"
	if err := os.WriteFile(filepath.Join(r.cache, ".times"), []byte(times), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(t.TempDir(), "binaries-built")
	r.open(t, "fetch-etcd")
	var stdout, stderr screen
	cmd := r.command(t, &stdout, &stderr, []string{"FAKE_GATE=" + r.gate, "AICR_TOOLS_HEARTBEAT=1"},
		"bindir", "--with", "binaries=touch "+mark, "--fetch", "binaries=echo fetched the modules of the binaries", "etcd", "helm")
	p := start(t, cmd)
	// etcd's build waits at its gate until a status line shows it building
	stderr.waitFor(t, p, regexp.MustCompile(`(?m)^\[tools [0-3]/4\] building [^;\n]*\betcd [0-9]+s;[^\n]* elapsed, ~[0-9]+[sm] left\n`), "status line with etcd building")
	r.open(t, "build-etcd")
	if err := p.wait(t); err != nil {
		t.Fatalf("hack/tools.sh: %v\n%s", err, stderr.String())
	}

	out := stderr.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("output without a terminal has carriage returns or escapes:\n%q", out)
	}
	if strings.Contains(out, "go: downloading go.etcd.io") || strings.Contains(out, "go: downloading helm.sh") {
		t.Errorf("the builds' own output reached the screen:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// etcd 100 s, binaries 60 s and the standard library 40 s on one slot, helm 200 s on the
	// other: 200 s, about 4 minutes
	if want := "[tools] building etcd, helm, stdlib, binaries (4 jobs, 2 compiles at a time; about 4m)"; lines[0] != want {
		t.Errorf("first line = %q, want %q", lines[0], want)
	}
	m := logLine.FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("second line = %q, want the log folder", lines[1])
	}
	if log, err := os.ReadFile(filepath.Join(m[1], "etcd.log")); err != nil || !strings.Contains(string(log), "go: downloading go.etcd.io/etcd/server/v3") {
		t.Errorf("etcd's log in %s: %q, %v; want the go noise", m[1], log, err)
	}
	if log, err := os.ReadFile(filepath.Join(m[1], "binaries.log")); err != nil || !strings.Contains(string(log), "fetched the modules of the binaries") {
		t.Errorf("the binaries' log in %s: %q, %v; want the output of its --fetch command", m[1], log, err)
	}
	var finished []string
	for _, l := range lines {
		if m := doneLine.FindStringSubmatch(l); m != nil {
			if m[1] != strconv.Itoa(len(finished)+1) || m[2] != "4" {
				t.Errorf("line %q counts %s/%s, want %d/4", l, m[1], m[2], len(finished)+1)
			}
			finished = append(finished, m[3])
		}
	}
	slices.Sort(finished)
	if want := []string{"binaries", "etcd", "helm", "stdlib"}; !slices.Equal(finished, want) {
		t.Errorf("finished jobs %v, want %v once each", finished, want)
	}
	if last := lines[len(lines)-1]; !allDone.MatchString(last) || allDone.FindStringSubmatch(last)[1] != "4" {
		t.Errorf("last line = %q, want all 4 done", last)
	}
	checkBinDir(t, stdout.String(), "etcd", "helm")
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the --with command did not run: %v", err)
	}
	recorded, _ := os.ReadFile(filepath.Join(r.cache, ".times"))
	if n := strings.Count(string(recorded), "etcd-v3.6.16:etcd "); n != 2 {
		t.Errorf(".times holds %d etcd entries, want the seeded one and this build's:\n%s", n, recorded)
	}

	// everything built: no output, the same folder, the --with command still runs
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	var stdout2, stderr2 screen
	cmd = r.command(t, &stdout2, &stderr2, nil, "bindir", "--with", "binaries=touch "+mark, "etcd", "helm")
	p = start(t, cmd)
	if err := p.wait(t); err != nil {
		t.Fatalf("second run: %v\n%s", err, stderr2.String())
	}
	if stderr2.String() != "" {
		t.Errorf("second run printed %q, want nothing", stderr2.String())
	}
	if stdout2.String() != stdout.String() {
		t.Errorf("second run's folder %q, want %q", stdout2.String(), stdout.String())
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the --with command did not run the second time: %v", err)
	}
}

// On a terminal: one status line redrawn in place (carriage return, clear to the end of the
// line), cut to the terminal's width, through downloading and building to done; lines that stay
// (a finished job) are printed above it, and nothing of it is left at the end.
func TestOneLineUpdatedInPlaceOnATerminal(t *testing.T) {
	const width = 60
	r := newRun(t)
	master, slave := openPTY(t, width)
	var stdout, tty screen
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			tty.Write(buf[:n]) //nolint:errcheck // never fails
			if err != nil {
				return // EIO once every writer closed the terminal
			}
		}
	}()
	cmd := r.command(t, &stdout, slave, []string{"FAKE_GATE=" + r.gate, "TERM=xterm"}, "bindir", "etcd", "helm")
	p := start(t, cmd)
	slave.Close()

	tty.waitFor(t, p, regexp.MustCompile(`\r\x1b\[K\[tools [01]/3\] [^\r\n]*downloading [^\r\n]*etcd`), "progress line with etcd downloading")
	r.open(t, "fetch-etcd")
	tty.waitFor(t, p, regexp.MustCompile(`\r\x1b\[K\[tools [0-2]/3\] building etcd [0-9]+s`), "progress line with etcd building")
	r.open(t, "build-etcd")
	if err := p.wait(t); err != nil {
		t.Fatalf("hack/tools.sh: %v\n%q", err, tty.String())
	}
	<-copied

	out := strings.ReplaceAll(tty.String(), "\r\n", "\n") // the terminal's own newline translation
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("the progress line is left on the screen at the end:\n%q", out)
	}
	redrawn := false
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		segments := strings.Split(line, "\r\x1b[K")
		if len(segments) > 2 {
			redrawn = true
		}
		for _, s := range segments[:len(segments)-1] {
			if strings.HasPrefix(s, "[tools ") && len(s) > width-1 {
				t.Errorf("progress line %q is wider than the terminal (%d)", s, width)
			}
		}
		if last := segments[len(segments)-1]; !strings.HasPrefix(last, "[tools] ") {
			t.Errorf("a line ends on %q, want every kept line to be an event line", last)
		}
	}
	if !redrawn {
		t.Errorf("the progress line was never redrawn in place:\n%q", out)
	}
	if strings.Contains(out, "go: downloading go.etcd.io") || strings.Contains(out, "go: downloading helm.sh") {
		t.Errorf("the builds' own output reached the terminal:\n%q", out)
	}
	if !regexp.MustCompile(`\[tools\] building etcd, helm, stdlib \(3 jobs, 2 compiles at a time; about [0-9]+m\)\n`).MatchString(out) {
		t.Errorf("no first line with the built-in estimate:\n%q", out)
	}
	if !regexp.MustCompile(`\[tools\] all 3 done in [0-9]+s\n$`).MatchString(out) {
		t.Errorf("output does not end with all 3 done:\n%q", out)
	}
	checkBinDir(t, stdout.String(), "etcd", "helm")
}

// A failed build stops the run with the end of its log and leaves the tool unbuilt.
func TestAFailedBuildPrintsTheEndOfItsLog(t *testing.T) {
	r := newRun(t)
	var stdout, stderr screen
	cmd := r.command(t, &stdout, &stderr, []string{"FAKE_FAIL=1"}, "ensure", "helm")
	p := start(t, cmd)
	err := p.wait(t)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("hack/tools.sh = %v, want exit 1\n%s", err, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{"[tools] FAILED: helm (exit 3) after ", "\n    boom: helm does not compile\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(r.cache, "helm-v3.19.5", ".done")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("helm marked done after a failed build: %v", err)
	}
}

// A tool another run is building is waited for, not built a second time.
func TestWaitsForTheBuildOfAnotherRun(t *testing.T) {
	r := newRun(t)
	dir := filepath.Join(r.cache, "etcd-v3.6.16")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr screen
	// no gate is ever opened: a second build of etcd would hang and fail
	cmd := r.command(t, &stdout, &stderr, []string{"FAKE_GATE=" + r.gate}, "bindir", "etcd")
	p := start(t, cmd)
	stderr.waitFor(t, p, regexp.MustCompile(`(?m)^\[tools\] etcd: another run is building it; waiting for that run$`), "waiting line")

	// the other run finishes: the binary in place, the build marked done, the lock released
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "etcd"), []byte("#!/bin/sh\necho etcd\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".done"), []byte("other run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("hack/tools.sh: %v\n%s", err, stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, "[tools] etcd: built meanwhile by another run\n") {
		t.Errorf("output lacks the line that the other run built etcd:\n%s", out)
	}
	checkBinDir(t, stdout.String(), "etcd")
}

// checkBinDir: the folder bindir printed runs each tool.
func checkBinDir(t *testing.T, stdout string, tools ...string) {
	t.Helper()
	dir := strings.TrimSpace(stdout)
	if strings.Contains(dir, "\n") || dir == "" {
		t.Fatalf("bindir printed %q, want one folder", stdout)
	}
	for _, tool := range tools {
		out, err := exec.Command(filepath.Join(dir, tool)).Output()
		if err != nil || strings.TrimSpace(string(out)) != tool {
			t.Errorf("%s in %s: %q, %v", tool, dir, out, err)
		}
	}
}

// repoRoot is the folder holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's folder")
		}
		dir = parent
	}
}

// The estimate of a tool never built here is its built-in figure at this machine's speed, learned
// from the jobs recorded in .times: a machine whose etcd and kwok builds took three times their
// built-in figures is told three times helm's and the standard library's.
func TestTheEstimateLearnsThisMachinesSpeed(t *testing.T) {
	for _, c := range []struct {
		name, times, want string
	}{
		// helm 100 s and the standard library 60 s, one slot each: 100 s, about 2 minutes
		{"nothing recorded: the built-in figures", "", "about 2m"},
		// etcd 120 s (built in: 40) and kwok 315 s (105): 300 %; helm 300 s, about 5 minutes
		{"three times slower", "etcd-v3.6.0:etcd 120\nkwok-v0.7.0:kwok 315\nredis-debian:redis 900\n", "about 5m"},
		// only the latest jobs count: the slow builds of long ago are outweighed
		{"faster lately", "etcd-v3.6.0:etcd 400\n" + strings.Repeat("etcd-v3.6.1:etcd 40\n", 8), "about 2m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			if err := os.MkdirAll(r.cache, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(r.cache, ".times"), []byte(c.times), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr screen
			p := start(t, r.command(t, &stdout, &stderr, nil, "ensure", "helm"))
			if err := p.wait(t); err != nil {
				t.Fatalf("hack/tools.sh: %v\n%s", err, stderr.String())
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if want := "[tools] building helm, stdlib (2 jobs, 2 compiles at a time; " + c.want + ")"; first != want {
				t.Errorf("first line = %q, want %q", first, want)
			}
		})
	}
}
