package logging

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// Field keys of the lines that come from a library rather than from the operator's own code.
const (
	// KeySource names the library a line came from: SourceKlog or SourceStdlog.
	KeySource = "source"
	// KeyCaller is the file:line klog reports for a line.
	KeyCaller = "caller"
	// KeyLogger is the name a klog/logr logger was given (WithName), when it has one.
	KeyLogger = "logger"
)

// Sources.
const (
	SourceKlog   = "klog"
	SourceStdlog = "stdlog"
)

// klogVerbosity maps a --log-level to klog's -v. client-go logs request URLs from v=6 and
// request and response bodies from v=8 (which can hold Secret data), so the level never goes
// above 4.
func klogVerbosity(l zerolog.Level) int {
	switch {
	case l <= zerolog.TraceLevel:
		return 4
	case l == zerolog.DebugLevel:
		return 2
	default:
		return 0
	}
}

// RouteLibraries sends the output of the libraries a binary links into l, so a binary writes one
// stream of lines in one format with the same fields: klog (client-go, leader election, the
// informers) and the standard library's log package (net/http's server errors, such as a TLS
// handshake that failed). klog's verbosity follows l's level (see klogVerbosity). Both are
// process-wide, so the last call wins; a binary calls it once, from service.Start.
//
// klog's logger is installed once per process and reads the current l at each line: klog's
// setter is not safe beside goroutines that log, and a test process starts several services, one
// after the other, while the previous one's informers may still be logging.
func RouteLibraries(l zerolog.Logger) {
	kl := l.With().Str(KeySource, SourceKlog).Logger()
	libraryLog.Store(&kl)
	klogOnce.Do(func() {
		klogFlags = flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(klogFlags)
		// Errors are impossible: the flags exist and the values are valid.
		_ = klogFlags.Set("logtostderr", "true")
		klog.SetLoggerWithOptions(logr.New(&sink{}), klog.WriteKlogBuffer(writeKlogBuffer))
	})
	// klog guards its verbosity with its own lock.
	_ = klogFlags.Set("v", strconv.Itoa(klogVerbosity(l.GetLevel())))

	log.SetFlags(0)
	log.SetPrefix("")
	log.SetOutput(StdlogWriter(l, zerolog.WarnLevel))
}

// The process-wide state behind RouteLibraries: klog is process-wide, so its route is too.
var (
	klogOnce   sync.Once
	klogFlags  *flag.FlagSet
	libraryLog atomic.Pointer[zerolog.Logger]
)

// current returns the logger of the last RouteLibraries call.
func current() zerolog.Logger {
	if l := libraryLog.Load(); l != nil {
		return *l
	}
	return zerolog.Nop()
}

// StdlogWriter returns a writer that turns each line a standard library *log.Logger writes into
// one line of l at level, with source stdlog. Use it for an http.Server's ErrorLog:
// log.New(StdlogWriter(l, zerolog.WarnLevel), "", 0).
func StdlogWriter(l zerolog.Logger, level zerolog.Level) io.Writer {
	return &lineWriter{log: l.With().Str(KeySource, SourceStdlog).Logger(), level: level}
}

type lineWriter struct {
	log   zerolog.Logger
	level zerolog.Level
}

func (w *lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.log.WithLevel(w.level).Msg(line)
	}
	return len(p), nil
}

// writeKlogBuffer writes klog's unstructured lines (Infof, Warning, Errorf and their kin). klog
// hands them over formatted, header included ("W0102 15:04:05.000000    7 file.go:12] text"),
// which is the only place their severity survives: the header becomes the level and the caller,
// the text the message. A line without a header is kept whole at info.
func writeKlogBuffer(data []byte) {
	level, caller, msg := parseKlogLine(data)
	l := current()
	e := l.WithLevel(level)
	if caller != "" {
		e = e.Str(KeyCaller, caller)
	}
	e.Msg(msg)
}

// parseKlogLine splits a klog text line into its level, caller and message.
func parseKlogLine(data []byte) (zerolog.Level, string, string) {
	line := string(bytes.TrimRight(data, "\n"))
	end := strings.Index(line, "] ")
	if len(line) == 0 || end < 0 {
		return zerolog.InfoLevel, "", line
	}
	level, ok := map[byte]zerolog.Level{'I': zerolog.InfoLevel, 'W': zerolog.WarnLevel, 'E': zerolog.ErrorLevel, 'F': zerolog.FatalLevel}[line[0]]
	head := strings.Fields(line[:end])
	if !ok || len(head) < 4 {
		return zerolog.InfoLevel, "", line
	}
	return level, head[len(head)-1], line[end+2:]
}

// sink is a logr.LogSink over zerolog: klog's structured calls (InfoS, ErrorS, V(n).InfoS) and
// the contextual loggers client-go takes from klog end here. klog checks its own verbosity before
// calling; V(0) is info, V(1) to V(3) debug, deeper trace. A sink keeps its name and values and
// writes to the current logger (RouteLibraries).
type sink struct {
	values []any
	name   string
}

func levelOf(v int) zerolog.Level {
	switch {
	case v <= 0:
		return zerolog.InfoLevel
	case v < 4:
		return zerolog.DebugLevel
	default:
		return zerolog.TraceLevel
	}
}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(v int) bool { return current().GetLevel() <= levelOf(v) }

func (s *sink) Info(v int, msg string, kv ...any) {
	l := current()
	fields(l.WithLevel(levelOf(v)), s.name, s.values, kv).Msg(msg)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	l := current()
	e := l.Error()
	if err != nil {
		e = e.Err(err)
	}
	fields(e, s.name, s.values, kv).Msg(msg)
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{values: append(slices.Clip(s.values), kv...), name: s.name}
}

func (s *sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &sink{values: s.values, name: name}
}

// fields adds the logger name and the key/value pairs of each list to e.
func fields(e *zerolog.Event, name string, lists ...[]any) *zerolog.Event {
	if name != "" {
		e = e.Str(KeyLogger, name)
	}
	for _, kv := range lists {
		e = pairs(e, kv)
	}
	return e
}

func pairs(e *zerolog.Event, kv []any) *zerolog.Event {
	for i := 0; i < len(kv); i += 2 {
		k, v := pair(kv, i)
		if err, ok := v.(error); ok {
			e = e.AnErr(k, err)
			continue
		}
		e = e.Interface(k, v)
	}
	return e
}

// pair returns the key at i and its value; a key that is not a string is printed, and a key
// without a value gets "(MISSING)" as logr's own sinks do.
func pair(kv []any, i int) (string, any) {
	k, ok := kv[i].(string)
	if !ok {
		k = fmt.Sprint(kv[i])
	}
	if i+1 >= len(kv) {
		return k, "(MISSING)"
	}
	v := kv[i+1]
	if m, ok := v.(logr.Marshaler); ok {
		v = m.MarshalLog()
	}
	return k, v
}
