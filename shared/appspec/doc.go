// Package appspec renders a plan release as the Argo CD Application the operator writes, exactly
// as docs/argocd.md ("The Application shape") shows it. The applier writes what Build returns; readiness compares
// live Applications with it to find drift; the kubectl plugin prints it. One builder, so the
// three agree.
package appspec
