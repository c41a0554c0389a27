// Package signals gives a binary its root context: the first SIGTERM or SIGINT cancels it so the
// binary stops in order; a second one exits at once with code 130.
package signals

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Context returns the root context and a function that releases the signal handler.
func Context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			return
		}
		<-ch
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
