// Package leavealone holds the end-to-end tests of the "What to leave alone" table of
// docs/argocd.md on the local stack with a real Argo CD v3.4.2: what happens when a person edits, disables,
// arms, deletes or shadows an owned Application, and what Argo CD does with hand-added fields.
package leavealone
