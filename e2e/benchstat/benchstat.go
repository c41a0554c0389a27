// Package benchstat holds the figures of make bench: medians over repetitions, and what the API
// server's metrics and audit log say about a run.
package benchstat

import (
	"fmt"
	"slices"
	"strings"
)

// MinReps is how many repetitions every figure of make bench is the median of.
const MinReps = 3

// Summary is a figure measured over several repetitions: its median, min and max.
type Summary struct {
	N                int
	Median, Min, Max float64
}

// Summarize returns the median, min and max of xs (the median of an even count is the mean of
// the two middle values). An empty xs gives the zero Summary.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{N: len(s), Median: med, Min: s[0], Max: s[len(s)-1]}
}

// Format writes the summary as "median (min–max, n=N)" with format f for each number ("%.1f")
// and unit after the median ("ms"); a single repetition is written as "value (n=1)".
func (s Summary) Format(f, unit string) string {
	sep := ""
	if unit != "" {
		sep = " "
	}
	med := fmt.Sprintf(f, s.Median) + sep + unit
	if s.N == 1 {
		return med + " (n=1)"
	}
	return fmt.Sprintf("%s (%s–%s, n=%d)", med, fmt.Sprintf(f, s.Min), fmt.Sprintf(f, s.Max), s.N)
}

// Verdict is "met" when the median satisfies ok, "MISSED" when it does not, and "too few runs"
// when the figure has fewer than MinReps repetitions: a verdict never rests on the min or max.
func (s Summary) Verdict(ok func(median float64) bool) string {
	switch {
	case s.N < MinReps:
		return fmt.Sprintf("too few runs (%d < %d)", s.N, MinReps)
	case ok(s.Median):
		return "met"
	default:
		return "MISSED"
	}
}

// Series collects a figure's values by name over repetitions, in the order names first appear.
type Series struct {
	names []string
	vals  map[string][]float64
}

// Add records one repetition's value of name.
func (s *Series) Add(name string, v float64) {
	if s.vals == nil {
		s.vals = map[string][]float64{}
	}
	if _, ok := s.vals[name]; !ok {
		s.names = append(s.names, name)
	}
	s.vals[name] = append(s.vals[name], v)
}

// Last returns name's latest value (0 when it has none).
func (s *Series) Last(name string) float64 {
	vs := s.vals[name]
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

// Get summarises name's values.
func (s *Series) Get(name string) Summary { return Summarize(s.vals[name]) }

// GetCounted summarises name's values as a count made in each of n repetitions, zero in each
// that added none: a kind of request made in one run of three has the median 0, not that
// run's count.
func (s *Series) GetCounted(name string, n int) Summary {
	vs := slices.Clone(s.vals[name])
	for len(vs) < n {
		vs = append(vs, 0)
	}
	return Summarize(vs)
}

// Names lists the names in the order they were first added.
func (s *Series) Names() []string { return slices.Clone(s.names) }

// Medians joins the medians of names with sep, each with format f.
func (s *Series) Medians(f, sep string, names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf(f, s.Get(n).Median)
	}
	return strings.Join(parts, sep)
}
