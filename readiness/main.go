// Command readiness watches Argo CD's Applications and says what it sees: a verdict per release at
// its current step, drift of owned Applications, and whether Argo CD is installed. It writes
// nothing to Kubernetes.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/readiness/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
