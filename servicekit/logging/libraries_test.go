package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// lines decodes every line of out as a JSON object, failing on any line that is not one.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a line that is not JSON: %q (%v); all output:\n%s", l, err, out)
		}
		got = append(got, m)
	}
	return got
}

// TestRouteLibraries proves klog's text and structured calls and the standard library's log
// come out as JSON lines of the binary's logger, with its fields, the right level and their
// source; and that klog's verbosity follows the level.
func TestRouteLibraries(t *testing.T) {
	cases := map[string]struct {
		level string
		emit  func()
		want  []map[string]any // fields each line must have, in order
	}{
		"klog's Infof, with the caller from its header": {
			level: "info",
			emit:  func() { klog.Infof("attempting to acquire leader lease %s...", "aicr-system/aicr-planner") },
			want: []map[string]any{{"level": "info", "source": "klog", "component": "planner",
				"message": "attempting to acquire leader lease aicr-system/aicr-planner..."}},
		},
		"klog's Warning and Errorf keep their severity": {
			level: "info",
			emit: func() {
				klog.Warning("watch ended")
				klog.Errorf("error retrieving resource lock %s: %v", "aicr-system/aicr-planner", "connection refused")
			},
			want: []map[string]any{
				{"level": "warn", "source": "klog", "message": "watch ended"},
				{"level": "error", "source": "klog", "message": "error retrieving resource lock aicr-system/aicr-planner: connection refused"},
			},
		},
		"klog's structured calls carry their pairs": {
			level: "info",
			emit: func() {
				klog.InfoS("lease acquired", "lease", klog.KRef("aicr-system", "aicr-planner"), "attempt", 2)
				klog.ErrorS(errors.New("boom"), "renew failed", "odd")
				klog.Background().WithName("reflector").WithValues("type", "*v1.Lease").Info("listing")
			},
			want: []map[string]any{
				{"level": "info", "source": "klog", "message": "lease acquired", "attempt": float64(2),
					"lease": map[string]any{"name": "aicr-planner", "namespace": "aicr-system"}},
				{"level": "error", "source": "klog", "message": "renew failed", "error": "boom", "odd": "(MISSING)"},
				{"level": "info", "source": "klog", "message": "listing", "type": "*v1.Lease"},
			},
		},
		"klog's V(2) is hidden at info": {
			level: "info",
			emit: func() {
				klog.V(2).Infof("hidden")
				klog.V(2).InfoS("hidden too")
				klog.Info("shown")
			},
			want: []map[string]any{{"level": "info", "message": "shown"}},
		},
		"klog's V(2) is debug at debug, V(4) hidden": {
			level: "debug",
			emit: func() {
				klog.V(2).InfoS("a debug line")
				klog.V(4).InfoS("hidden")
			},
			want: []map[string]any{{"level": "debug", "source": "klog", "message": "a debug line"}},
		},
		"the standard library's log, one line each": {
			level: "info",
			emit:  func() { log.Printf("http: TLS handshake error from %s: EOF\nsecond line", "127.0.0.1:5000") },
			want: []map[string]any{
				{"level": "warn", "source": "stdlog", "component": "planner", "message": "http: TLS handshake error from 127.0.0.1:5000: EOF"},
				{"level": "warn", "source": "stdlog", "message": "second line"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, FormatJSON, tc.level, "planner")
			if err != nil {
				t.Fatal(err)
			}
			RouteLibraries(l)
			t.Cleanup(func() { RouteLibraries(zerolog.Nop()) })
			tc.emit()
			klog.Flush()
			got := lines(t, buf.String())
			if len(got) != len(tc.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(got), len(tc.want), buf.String())
			}
			for i, want := range tc.want {
				for k, v := range want {
					g, _ := json.Marshal(got[i][k])
					w, _ := json.Marshal(v)
					if string(g) != string(w) {
						t.Errorf("line %d: %s = %s, want %s (line %v)", i, k, g, w, got[i])
					}
				}
				if _, ok := got[i]["time"]; !ok {
					t.Errorf("line %d has no time: %v", i, got[i])
				}
			}
		})
	}
}

// TestRouteLibrariesCaller proves a klog text line names the file and line it came from.
func TestRouteLibrariesCaller(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, FormatJSON, "info", "readiness")
	if err != nil {
		t.Fatal(err)
	}
	RouteLibraries(l)
	t.Cleanup(func() { RouteLibraries(zerolog.Nop()) })
	klog.Info("from here")
	got := lines(t, buf.String())
	if c, _ := got[0][KeyCaller].(string); !strings.HasPrefix(c, "libraries_test.go:") {
		t.Errorf("caller = %q, want libraries_test.go:LINE", c)
	}
}

func TestParseKlogLine(t *testing.T) {
	cases := map[string]struct {
		in          string
		level       zerolog.Level
		caller, msg string
	}{
		"an info line":       {"I0102 15:04:05.000000    7 leaderelection.go:257] attempting\n", zerolog.InfoLevel, "leaderelection.go:257", "attempting"},
		"a fatal line":       {"F0102 15:04:05.000000 7 main.go:1] gone", zerolog.FatalLevel, "main.go:1", "gone"},
		"no header":          {"just text", zerolog.InfoLevel, "", "just text"},
		"an unknown letter":  {"X0102 15:04:05.000000 7 main.go:1] text", zerolog.InfoLevel, "", "X0102 15:04:05.000000 7 main.go:1] text"},
		"empty":              {"", zerolog.InfoLevel, "", ""},
		"a bracket, no head": {"a] b", zerolog.InfoLevel, "", "a] b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			level, caller, msg := parseKlogLine([]byte(tc.in))
			if level != tc.level || caller != tc.caller || msg != tc.msg {
				t.Errorf("parse %q = %v %q %q, want %v %q %q", tc.in, level, caller, msg, tc.level, tc.caller, tc.msg)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for the goroutines of TestRouteLibrariesWhileLogging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRouteLibrariesWhileLogging proves a second RouteLibraries, as a test process that starts
// one service after another makes, is safe beside goroutines logging through klog (the race
// detector checks it) and moves every klog logger, one derived before the call included, to the
// new logger.
func TestRouteLibrariesWhileLogging(t *testing.T) {
	var first, second lockedBuffer
	a, err := New(&first, FormatJSON, "info", "first")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(&second, FormatJSON, "info", "second")
	if err != nil {
		t.Fatal(err)
	}
	RouteLibraries(a)
	t.Cleanup(func() { RouteLibraries(zerolog.Nop()) })
	derived := klog.Background().WithName("informer").WithValues("resource", "applications")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				klog.InfoS("structured", "n", 1)
				klog.Background().Info("contextual")
				derived.Info("derived")
			}
		}()
	}
	for range 50 {
		RouteLibraries(b)
		RouteLibraries(a)
	}
	RouteLibraries(b)
	close(stop)
	wg.Wait()

	before := strings.Count(second.String(), "\n")
	derived.Info("after the move", "k", "v")
	got := lines(t, second.String())
	if len(got) != before+1 {
		t.Fatalf("the derived logger wrote %d lines to the current logger, want 1", len(got)-before)
	}
	last := got[len(got)-1]
	if last["component"] != "second" || last[KeyLogger] != "informer" || last["resource"] != "applications" || last["k"] != "v" || last[KeySource] != SourceKlog {
		t.Errorf("derived line = %v, want component second, logger informer, resource applications, k v, source klog", last)
	}
}
