// Command kubectl-aicr is the kubectl plugin of aicr-operator ("kubectl aicr ..."): it follows
// rollouts live, draws their dependency graphs, approves and revokes them, pauses the runtime or
// the engine, shows what the next rollout would change, reproduces plans, and previews what a
// bundle would do without a cluster. It talks to the API server; besides it, only bundle push and
// import and check's repo-creds probe reach an OCI registry, and logs may read the local stack's
// log files.
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
