package benchstat

import "testing"

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []float64{4}, Summary{N: 1, Median: 4, Min: 4, Max: 4}},
		{"odd, unsorted", []float64{90, 10, 50}, Summary{N: 3, Median: 50, Min: 10, Max: 90}},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, Min: 1, Max: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.in); got != tc.want {
				t.Fatalf("Summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Fatalf("input reordered: %v", in)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		s    Summary
		f    string
		unit string
		want string
	}{
		{Summary{N: 3, Median: 47.25, Min: 40, Max: 60.04}, "%.1f", "ms", "47.2 ms (40.0–60.0, n=3)"},
		{Summary{N: 1, Median: 12}, "%.0f", "writes/s", "12 writes/s (n=1)"},
		{Summary{N: 5, Median: 2, Min: 1, Max: 3}, "%.0f", "", "2 (1–3, n=5)"},
	} {
		if got := tc.s.Format(tc.f, tc.unit); got != tc.want {
			t.Errorf("Format(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// The verdict follows the median only: a fast minimum does not make a target met, a slow
// maximum does not make it missed, and fewer than MinReps runs give no verdict.
func TestVerdictFollowsTheMedian(t *testing.T) {
	under50 := func(m float64) bool { return m <= 50 }
	for _, tc := range []struct {
		name string
		s    Summary
		want string
	}{
		{"median met, max over", Summary{N: 3, Median: 48, Min: 30, Max: 120}, "met"},
		{"median over, min met", Summary{N: 3, Median: 51, Min: 10, Max: 60}, "MISSED"},
		{"single run", Summary{N: 1, Median: 10, Min: 10, Max: 10}, "too few runs (1 < 3)"},
	} {
		if got := tc.s.Verdict(under50); got != tc.want {
			t.Errorf("%s: Verdict = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSeries(t *testing.T) {
	var s Series
	for _, rep := range [][2]float64{{10, 1}, {30, 3}, {20, 2}} {
		s.Add("p50", rep[0])
		s.Add("cpu", rep[1])
	}
	if got := s.Names(); len(got) != 2 || got[0] != "p50" || got[1] != "cpu" {
		t.Fatalf("Names = %v, want [p50 cpu]", got)
	}
	if got := s.Get("p50"); got != (Summary{N: 3, Median: 20, Min: 10, Max: 30}) {
		t.Fatalf("p50 = %+v", got)
	}
	if got := s.Medians("%.0f", " / ", "p50", "cpu"); got != "20 / 2" {
		t.Fatalf("Medians = %q", got)
	}
	if got := s.Get("absent"); got.N != 0 {
		t.Fatalf("absent = %+v", got)
	}
	// Last is the repetition just added (a paired ratio divides two of them), not the median.
	if got, absent := s.Last("p50"), s.Last("absent"); got != 20 || absent != 0 {
		t.Fatalf("Last(p50), Last(absent) = %v, %v; want 20, 0", got, absent)
	}
}

// A count made in one repetition of three is not the median of three.
func TestGetCountedHasZeroForTheRepetitionsWithout(t *testing.T) {
	var s Series
	s.Add("req:GET applications", 1.0)
	if got := s.GetCounted("req:GET applications", 3); got.Median != 0 || got.Max != 1 || got.N != 3 {
		t.Errorf("GetCounted = %+v, want median 0, max 1 over 3", got)
	}
	s.Add("req:GET applications", 2.0)
	if got := s.GetCounted("req:GET applications", 3).Median; got != 1 {
		t.Errorf("median of 1, 2 and a missing 0 = %v, want 1", got)
	}
	if got := s.GetCounted("req:never", 3); got.Median != 0 || got.N != 3 {
		t.Errorf("GetCounted of a name never added = %+v, want three zeros", got)
	}
}
