package servicetest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// raceHeader opens every report of the race detector; raceRule is the line of = signs that
// comes before it and ends the report.
const (
	raceHeader = "WARNING: DATA RACE"
	raceRule   = "=================="
)

// raceReportLines bounds the lines kept of one report: the two accesses' stacks and where their
// goroutines were created fit in it; a longer one is cut with a note.
const raceReportLines = 80

// RaceReports returns the race detector's reports in a process's output, each from its
// "WARNING: DATA RACE" line to the line of = signs that closes it (at most 80 lines). A binary
// built with -race writes one to its standard error for every race it sees, and goes on.
func RaceReports(out []byte) []string {
	var reports []string
	_ = scanRaces(bytes.NewReader(out), func(_ int64, report string) { reports = append(reports, report) })
	return reports
}

// scanRaces calls found with each race report in r and the offset of its first line, reading a
// line at a time (a log may be large); a report r ends in is passed as far as it got.
func scanRaces(r io.Reader, found func(at int64, report string)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		pos, at int64
		lines   []string
		more    int
		in      bool
	)
	flush := func() {
		if more > 0 {
			lines = append(lines, fmt.Sprintf("... (%d more lines)\n", more))
		}
		found(at, strings.TrimRight(strings.Join(lines, ""), "\n"))
		lines, more, in = nil, 0, false
	}
	for {
		line, err := br.ReadString('\n')
		switch {
		case in && strings.HasPrefix(line, raceRule):
			flush()
		case in && len(lines) < raceReportLines:
			lines = append(lines, line)
		case in:
			more++
		case strings.Contains(line, raceHeader):
			in, at = true, pos+int64(strings.Index(line, raceHeader))
			lines = []string{line[strings.Index(line, raceHeader):]}
		}
		pos += int64(len(line))
		if err == io.EOF {
			if in {
				flush()
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// LogRace is one race report found in a log file, and where it starts.
type LogRace struct {
	Log    string // the file's name
	Offset int64  // the report's first byte in the file
	Report string
}

func (r LogRace) String() string {
	return fmt.Sprintf("DATA RACE in %s at byte %d:\n%s", r.Log, r.Offset, r.Report)
}

// LogMark is where each log file of a folder ended at one moment (LogMarkOf), so that
// RacesSince reads only what the processes wrote after it.
type LogMark map[string]int64

// LogMarkOf records the size of every *.log file in dir; a folder that does not exist yet
// gives an empty mark.
func LogMarkOf(dir string) LogMark {
	m := LogMark{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			m[filepath.Base(f)] = st.Size()
		}
	}
	return m
}

// RacesSince returns the race reports written into dir's *.log files after the mark (a file
// the mark does not know is read whole), in the order of the files' names. A report being
// written while it reads is taken as far as it got.
func RacesSince(dir string, mark LogMark) ([]LogRace, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var races []LogRace
	for _, path := range files {
		name := filepath.Base(path)
		from := mark[name]
		err := scanFrom(path, from, func(at int64, report string) {
			races = append(races, LogRace{Log: name, Offset: at, Report: report})
		})
		if err != nil {
			return races, fmt.Errorf("read %s for race reports: %w", path, err)
		}
	}
	return races, nil
}

// scanFrom scans path for race reports from offset on (from the start when the file is shorter:
// it was replaced); at is an offset in the file.
func scanFrom(path string, offset int64, found func(at int64, report string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < offset {
		offset = 0
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	return scanRaces(f, func(at int64, report string) { found(offset+at, report) })
}
