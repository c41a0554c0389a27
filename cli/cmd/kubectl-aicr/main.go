// Command kubectl-aicr is the kubectl plugin of aicr-operator ("kubectl aicr ..."): it describes,
// approves and revokes rollouts, follows their progress, reproduces plans, and previews what a
// bundle would do without a cluster. It talks only to the API server.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/cli/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], app.DefaultEnv())
	stop()
	os.Exit(code)
}
