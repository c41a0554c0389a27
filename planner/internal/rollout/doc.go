// Package rollout is the planner's pure rollout state machine and step scheduler. It reads and
// changes a RuntimeRollout's status in memory and says which commands to publish; it does no
// I/O and takes the time from its caller, so every transition is testable with a fixed clock.
//
// A rollout moves Pending → Progressing ⇄ {AwaitingApproval, Stalled} → one terminal phase:
// Succeeded, Failed, Expired, Revoked or Superseded. See docs/planner.md.
package rollout
