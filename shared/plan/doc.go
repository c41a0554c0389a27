// Package plan turns a bundle, the runtime's overrides and its placement into a plan: releases
// with their final values and dependency graph, serialised canonically and named by its digest
// (sha256 over the canonical bytes, so the same input gives the same digest on any machine).
// It also derives a rollout's steps from two plans. It is pure: no I/O, no clock. The planner,
// admission, readiness, the applier and the kubectl plugin all use it, so they agree.
//
// Cache is the one plan-by-digest cache of the planner, the applier and readiness: bounded,
// verifying every plan it keeps against its digest, sharing concurrent loads of one digest. It
// does no I/O itself: each user gives the Loader that reads a plan ConfigMap its own way (a GET,
// an informer's store).
package plan
