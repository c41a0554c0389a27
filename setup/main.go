// Command setup creates, once, the Secrets the Helm chart cannot render under helm template: the
// NATS passwords with their bcrypt hashes and the CAs and certificates of NATS and the webhook
// (when cert-manager does not issue them). It runs as the chart's pre-install and pre-upgrade
// Job (an Argo CD PreSync hook), never rewrites a Secret that exists and exits.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/servicekit/signals"
	"github.com/aicr-run/aicr-operator/setup/internal/app"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
