// Package appwriter turns one applier command into exactly the Application write of
// docs/argocd.md and docs/contracts.md: a server-side apply of the Application appspec.Build renders, the
// refresh handshake when the write changed nothing, the explicit sync of a readiness release,
// and the Remove sequence. It refuses Applications it does not own and Applications carrying
// Argo CD's resources finalizer outside a Remove step, and answers every command with one
// bus.ApplyResult.
//
// Every handler is idempotent: a command may be delivered any number of times, to any replica,
// and after a crash anywhere. State lives on the Application (the operator.aicr.run/step,
// step-write and refresh-for annotations, the sync operation's info), so a redelivery finds
// what the previous attempt did and completes it.
package appwriter
