// Package rollout is the planner's pure rollout state machine and step scheduler. It reads and
// changes a RuntimeRollout's status in memory and says which commands to publish; it does no
// I/O and takes the time from its caller, so every transition is testable with a fixed clock.
//
// A rollout moves Pending → Progressing ⇄ {AwaitingApproval, Stalled} → one terminal phase:
// Succeeded, Failed, Expired, Revoked or Superseded.
//
// It also holds the decisions of a runtime's reconcile about its rollouts (runtime.go): which
// rollout is in flight, where the stack is (Position, Adopt), where it goes next
// (ChooseTarget), whether the rollout in flight is superseded or waited for (Replace), what
// becomes of an existing rollout of the move (ReuseExisting), the scheduler's environment
// (EnvFor) and engine suspension (EngineSuspension). See docs/planner.md.
package rollout
