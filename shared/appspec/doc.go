// Package appspec renders a plan release as the Argo CD Application the operator writes, exactly
// as docs/argocd.md ("The Application shape") shows it, and compares a live Application with it
// (Detect: the drift kinds, PlanDecidedAnnotations: the one list of annotations a plan decides).
// The applier writes what Build returns; readiness and the planner find drift with Detect
// against it; the kubectl plugin prints it. One builder and one comparison, so all of them agree.
package appspec
