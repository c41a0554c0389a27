// Package testenv starts a real Kubernetes control plane (etcd and kube-apiserver), and on request
// kube-controller-manager, kube-scheduler, kwok, Argo CD v3.4.2 (redis, repo-server,
// application-controller) and an OCI registry, as local processes on free loopback ports. It is
// the harness of the integration and e2e test tiers; docs/testing.md describes the tiers and the
// stack.
//
// One environment per test package is the rule: start it in TestMain with RunMain and fetch it in
// each test with Current, which skips the test when the tools are not built (or fails it when
// AICR_REQUIRE_TOOLS=1):
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.RunMain(m, testenv.Options{Kwok: true}))
//	}
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Current(t)
//		cs := kubernetes.NewForConfigOrDie(env.Config)
//		...
//	}
//
// A test that needs an environment of its own uses StartT, which stops it in t.Cleanup.
//
// Tools come from the folder named by AICR_TOOLS_BIN (the Makefile sets it), or else from
// hack/tools.sh's cache when every needed tool is already built there; testenv never builds
// tools itself. Each process runs in its own process group, is listed in <Dir>/pids and logs to
// <Dir>/logs/<name>.log. Env.Stop stops them in reverse start order (SIGTERM, then SIGKILL after
// 10 s) and removes Dir unless AICR_KEEP_TESTENV is set.
//
// Environment variables:
//
//	AICR_TOOLS_BIN      folder with etcd, kube-apiserver, ... (see Options for which are needed)
//	AICR_REQUIRE_TOOLS  "1": missing tools fail the tests instead of skipping them
//	AICR_KEEP_TESTENV   "1": keep Dir (logs, PKI, kubeconfig, etcd data) after Stop;
//	                    "running": also leave the processes running, for poking at with kubectl
package testenv
