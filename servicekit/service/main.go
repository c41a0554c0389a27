package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Flags is what a binary's Options implement.
type Flags interface {
	// BindFlags registers the flags with their defaults.
	BindFlags(fs *flag.FlagSet)
	// Validate checks the parsed flags and names the flag at fault.
	Validate() error
}

// Main is every binary's Main: it parses args into o, validates them, calls run, and returns
// the exit code: 2 for bad flags (the message names the flag), 1 when run fails, 0 for a clean
// stop (a cancelled context included).
func Main(ctx context.Context, name string, args []string, stderr io.Writer, o Flags, run func(context.Context) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}
