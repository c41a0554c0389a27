// Package refresher keeps the registry credentials fresh (mode aws) or checks them (mode static)
// on an injected clock, and reports each result on bus.SubjectCredentials through a Reporter
// that never blocks the refresh: writing the Secret must not wait for NATS.
package refresher
