// Package credentials holds the end-to-end tests of registry credentials in aws mode on the
// local stack: the registry requires user AWS and a password, a local endpoint speaking ECR's
// GetAuthorizationToken hands that password out as the token, credrefresher writes it into the
// repo-creds Secret, and Argo CD v3.4.2 pulls every chart with it. The tests rotate the password,
// let the token lapse while the endpoint fails, and check that the token never leaks into a log,
// the ClusterRuntime's status or an Event.
package credentials
