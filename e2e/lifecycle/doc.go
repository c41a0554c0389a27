// Package lifecycle holds the end-to-end tests of a runtime's life on the local stack with a real
// Argo CD v3.4.2: readiness only at the current revision, the readiness gate's explicit sync, the
// refresh handshake of an unchanged write, an approved Remove, suspendEngine and paused, and
// deletion with deletionPolicy Delete (last: it removes the runtime).
package lifecycle
