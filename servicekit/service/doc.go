// Package service is what every binary shares around its own work: the common flags (NATS,
// Kubernetes, health, metrics, logging), the NATS connection that waits for the server, the
// health and metrics HTTP servers, leader election on a Lease, and orderly shutdown. A binary's
// internal/app builds its Options on top of Options here and calls Start from Run.
package service
