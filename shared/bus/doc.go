// Package bus is the NATS contract between the binaries: every subject (subjects.go), every
// message type (messages.go), the JetStream streams and durable consumers (streams.go), each
// binary's NATS identity and the one table of what it may publish and subscribe to
// (permissions.go), the publisher that stamps message IDs for de-duplication (publish.go), and
// the one dispatch loop that decodes, logs, counts and alone decides ack, delayed nak or term
// (dispatch.go).
//
// Kubernetes is the durable truth; the bus carries work and news. Every handler is idempotent:
// JetStream redelivers, and any binary can die at any moment.
package bus
