// Package compose holds the e2e test of the docker-compose stack (deploy/compose,
// e2e/composestack) under real network faults: a NATS node cut from the network, the planner
// leader's container paused and an applier's restarted during a rollout (build tag compose; it
// needs Docker and the local stack's tools).
package compose
