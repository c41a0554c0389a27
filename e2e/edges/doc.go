// Package edges holds the end-to-end tests of the operator's promises at their edges, on the
// local stack with a real Argo CD v3.4.2: a hand edit of the release in flight never passes its
// step, a release that stops being ready after its rollout makes the runtime NotReady, a step
// whose write leaves nothing to sync passes on Argo CD's comparison, a write that changes only
// the comparison exceptions waits for a fresh comparison, and a foreign Application fails the
// rollout that reaches it; edits are forced back from the live Applications, with readiness
// publishing no drift report at all (a failed first install's releases, annotations a plan
// decides, an edit standing when a rollout fails), and FieldOwnershipOverridden is recorded
// only after the write. Tests run in order on one stack; each leaves the runtime Ready.
package edges
