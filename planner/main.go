// Command planner decides: it resolves plans, creates rollouts, schedules their steps, honours
// approvals and timeouts, and alone writes rollout and runtime status.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/planner/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
