// Package bench measures the operator's published figures on a real kube-apiserver and etcd
// (testkit/testenv, no Argo CD) and a real NATS JetStream server: step advance latency through
// every bus hop, the operator overhead of a 30-release rollout, plan compute, applier writes per
// second, and the resident memory of the binaries. The benchmark plays Argo CD by writing
// Application statuses the way Argo CD v3.4.2 writes them.
//
// The files carry the build tag bench, so only `make bench` runs them:
//
//	make bench
//
// which is, after make build:
//
//	AICR_TOOLS_BIN=$(hack/tools.sh bindir etcd kube-apiserver) \
//	AICR_REQUIRE_TOOLS=1 AICR_BIN_DIR=$PWD/bin \
//	go test -tags bench -run '^$' -bench . -benchtime 1x -timeout 20m ./e2e/bench
package bench
