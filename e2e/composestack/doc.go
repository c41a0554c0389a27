// Package composestack runs the operator's docker-compose stack (deploy/compose, docs/compose.md)
// for make compose-demo and the e2e tests of e2e/compose: it builds every image on this machine
// (the five binaries with e2e/imagebuild, the cluster, Argo CD, redis, NATS and the registry from
// the local stack's tools, FROM scratch), cached in the user cache and keyed by their inputs,
// starts the stack with docker-compose, pushes the example charts, prepares the cluster as the
// chart would (e2e/stack.Attach) and registers the admission webhook. Down removes every
// container, network and volume of the project.
package composestack
