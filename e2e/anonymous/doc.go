// Package anonymous holds the end-to-end test of static registry credentials with a registry
// that needs none, on the local stack with a real Argo CD v3.4.2: the repo-creds Secret as the
// specification's snippet creates it (an empty username and password) is all Argo CD gets, and
// the stack rolls out through it.
package anonymous
