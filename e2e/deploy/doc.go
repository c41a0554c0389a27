// Package deploy holds the tests of deploy/ (the Helm chart, the compose file) and of the
// example bundle: it has no code of its own. Tests that render the chart need helm and carry the
// integration build tag, since they also apply what they render to a real kube-apiserver
// (testkit/testenv).
package deploy
