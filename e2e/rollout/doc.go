// Package rollout holds the end-to-end tests of a rollout on the local stack with a real
// Argo CD v3.4.2: dependency order, the Application's shape, the readiness gate's sync.
package rollout
