package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
)

// Flags is what a binary's Options implement.
type Flags interface {
	// BindFlags registers the flags with their defaults.
	BindFlags(fs *flag.FlagSet)
	// Validate checks the parsed flags and names the flag at fault.
	Validate() error
}

// logFlags is implemented by Options and so by every binary's Options that embeds it.
type logFlags interface{ logFlags() (format, level string) }

func (o *Options) logFlags() (string, string) { return o.LogFormat, o.LogLevel }

// Main is every binary's Main: it parses args into o, validates them, calls run, and returns
// the exit code: 2 for bad flags (the message names the flag), 1 when run fails, 0 for a clean
// stop (a cancelled context included). The reason for a non-zero exit is one log line in the
// binary's --log-format, so even a binary that never started writes only JSON; only flag
// parsing errors (an unknown flag, with the usage) come before the format is known and stay
// text.
func Main(ctx context.Context, name string, args []string, stderr io.Writer, o Flags, run func(context.Context) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.Validate(); err != nil {
		exitLine(stderr, name, o, err)
		return 2
	}
	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		exitLine(stderr, name, o, err)
		return 1
	}
	return 0
}

// exitLine writes why the binary exits: a log line when the log flags make a logger (the
// message carries the binary's name, as the text form does), else "name: error".
func exitLine(w io.Writer, name string, o Flags, err error) {
	if lf, ok := o.(logFlags); ok {
		format, _ := lf.logFlags()
		// At error level whatever --log-level says: the reason for an exit is never filtered.
		if l, lerr := logging.New(w, format, "error", name); lerr == nil {
			l.Error().Err(err).Msg(name + " exits")
			return
		}
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
}
