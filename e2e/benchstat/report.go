package benchstat

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Report collects a run's figures and prints them as one Markdown table, headed by the machine,
// the load at the start and at the end, the commit and the run's duration.
type Report struct {
	// Title heads the table ("aicr-operator performance").
	Title string

	mu        sync.Mutex
	rows      []row
	startLoad string
	commit    string
	started   time.Time
}

type row struct{ name, value, target, verdict string }

// NewReport starts a report: the load, the commit and the time now are the run's start.
func NewReport(title string) *Report {
	return &Report{Title: title, startLoad: LoadAvg(), commit: Commit(), started: time.Now()}
}

// Add records a figure with its target and verdict (Summary.Verdict).
func (r *Report) Add(name, value, target, verdict string) {
	r.mu.Lock()
	r.rows = append(r.rows, row{name, value, target, verdict})
	r.mu.Unlock()
}

// Info records a figure without a target.
func (r *Report) Info(name, value string) { r.Add(name, value, "", "") }

// Print writes the table.
func (r *Report) Print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\n## %s\n\n", r.Title)
	fmt.Fprintf(w, "%s; %s/%s, %d CPUs (%s), %s; load average (1, 5, 15 min) %s at the start, %s at the end; commit %s; the run took %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), CPUModel(), memTotal(),
		r.startLoad, LoadAvg(), r.commit, time.Since(r.started).Round(time.Second))
	fmt.Fprintln(w, "| Figure | Measured: median (min–max, runs) | Target | |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, x := range r.rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", x.name, x.value, x.target, x.verdict)
	}
	fmt.Fprintln(w)
}

// CPUModel is the first model name of /proc/cpuinfo.
func CPUModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == "MemTotal" {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d", &kib); err != nil {
				return "memory unknown"
			}
			return fmt.Sprintf("%.0f GiB", float64(kib)/(1<<20))
		}
	}
	return "memory unknown"
}

// LoadAvg is the 1, 5 and 15 minute load averages (what uptime prints).
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Commit is the short commit of the working tree, with "+changes" when it has uncommitted
// changes to tracked files.
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+changes"
	}
	return c
}
