package testenv

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// pollInterval is how often WaitFor evaluates its condition.
const pollInterval = 100 * time.Millisecond

// WaitFor polls cond every 100 ms until it returns true, ctx ends or timeout passes. An error from
// cond counts as "not yet" (a Get that is NotFound until the object exists, a server that does not
// answer yet); the last one is part of the timeout error. what names the state waited for, in the
// form "deployment web available", and leads the error message.
//
// Tests use it with a named timeout instead of sleeping:
//
//	const deploymentAvailableTimeout = time.Minute
//	err := testenv.WaitFor(ctx, deploymentAvailableTimeout, "deployment web available", func(ctx context.Context) (bool, error) { ... })
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok && err == nil {
			return nil
		}
		if pe := (*permanentError)(nil); errors.As(err, &pe) {
			return fmt.Errorf("wait for %s: %w", what, pe.err)
		}
		// An error from a call the wait's own deadline cut short ("rate limiter Wait returned an
		// error: context deadline exceeded") says nothing about the state: keep the one before.
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait for %s: gave up after %s: %w (last error: %w)", what, timeout, ctx.Err(), last)
			}
			return fmt.Errorf("wait for %s: gave up after %s: %w", what, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// permanentError ends a WaitFor at once (a process that exited will not become ready).
// Permanent makes one: a condition returns it for a state that waiting cannot change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that WaitFor stops at once and returns it instead of retrying.
func Permanent(err error) error { return &permanentError{err: err} }
