// Command credrefresher keeps the registry credentials Argo CD pulls charts with fresh: with
// --registry-auth aws it writes a new ECR token into the repo-creds Secret at start and every 6
// hours; with static it checks the admin's Secret. It reports either on NATS.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
