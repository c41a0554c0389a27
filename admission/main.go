// Command admission is the operator's validating admission webhook: the rules Kubernetes RBAC
// cannot say, about Applications carrying Argo CD's resources finalizer, rollout approvals,
// the ClusterRuntime's spec and finalizer, and plan ConfigMaps. It publishes each denial for
// audit.
package main

import (
	"os"

	"github.com/aicr-run/aicr-operator/admission/internal/app"
	"github.com/aicr-run/aicr-operator/servicekit/signals"
)

func main() {
	ctx, stop := signals.Context()
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
