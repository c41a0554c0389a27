// Command applier turns each command of the shared work queue into exactly one correct
// Application write: server-side apply, the refresh handshake, a readiness release's explicit
// sync, and the Remove sequence. Run as many replicas as you like.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/applier/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
