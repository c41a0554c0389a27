// Package app is the planner's wiring: its options and Run.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/logging"
	"github.com/aicr-run/aicr-operator/shared/service"
)

// Name is the binary's name: logger component, metrics namespace, NATS connection name, durable
// consumer and leader-election lock.
const Name = "planner"

// Options are the planner's flags.
type Options struct {
	service.Options
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
}

// Validate checks the flags.
func (o *Options) Validate() error {
	return o.Options.Validate()
}

// Main parses args, runs the binary and returns the exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return 2
	}
	if err := Run(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return 1
	}
	return 0
}

// Run runs the planner until ctx ends.
func Run(ctx context.Context, o Options) error {
	base, err := service.Start(Name, o.Options, true, os.Stderr)
	if err != nil {
		return err
	}
	defer base.Close()
	ctx = logging.Into(ctx, base.Log)
	g, gctx := errgroup.WithContext(ctx)
	if _, _, err := base.Serve(gctx, g); err != nil {
		return err
	}
	g.Go(func() error {
		return base.RunLeader(gctx, func(lctx context.Context) error {
			cons, err := bus.WaitConsumer(lctx, base.JS, bus.ConsumerPlanner, o.StreamReplicas)
			if err != nil {
				return err
			}
			d := &bus.Dispatcher{Consumer: cons, Routes: bus.Routes{}, Metrics: bus.NewMetrics(base.Registry, Name)}
			return d.Run(lctx)
		})
	})
	base.Log.Info().Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}
