//go:build chaos || e2e

package chaos

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// logFindings are the lines no log of a healthy run holds, each with what it means:
//   - a Go panic or fatal runtime error, recovered or not (a handler panic the dispatch loop
//     caught, client-go's HandleCrash, net/http's recovery), and a race detector report;
//   - a message a dispatch loop dropped for good: a command or event lost.
var logFindings = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(^|")panic: `), "panic"},
	{regexp.MustCompile(`(^|")fatal error: `), "fatal runtime error"},
	{regexp.MustCompile(`WARNING: DATA RACE`), "data race"},
	{regexp.MustCompile(`handler panic`), "handler panic (recovered)"},
	{regexp.MustCompile(`Observed a panic`), "panic (recovered)"},
	{regexp.MustCompile(`http: panic serving`), "panic serving HTTP (recovered)"},
	{regexp.MustCompile(`"level":"panic"`), "panic-level log"},
	{regexp.MustCompile(`"msg":"drop (undecodable )?message"`), "message dropped for good"},
}

// scanLogs reads every log in dir and returns one finding per matching line, and the number of
// lines and files read.
func scanLogs(dir string) (findings []string, lines, logs int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, 0, 0, err
	}
	logs = len(files)
	sort.Strings(files)
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return findings, lines, logs, fmt.Errorf("scan logs: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for n := 1; sc.Scan(); n++ {
			lines++
			line := sc.Text()
			for _, p := range logFindings {
				if p.re.MatchString(line) {
					findings = append(findings, fmt.Sprintf("%s in %s:%d: %s", p.what, filepath.Base(path), n, truncate(line, 400)))
					break
				}
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return findings, lines, logs, fmt.Errorf("scan %s: %w", path, err)
		}
	}
	return findings, lines, logs, nil
}

// lastLines returns up to n last non-empty lines of a file.
func lastLines(path string, n int) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
