package appwriter

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Names of the example the tests write.
const (
	testEngineNS   = "argocd"
	testOperatorNS = "aicr-system"
	testRuntime    = "cluster"
	testRuntimeUID = "6a3c1f8e-1111-4c2b-9d7e-000000000001"
	testRepository = "registry.example.com/aicr"
	testRollout    = "cluster-7f3a9c"
	testRolloutUID = "9b1d0c2e-2222-4c2b-9d7e-000000000002"
	// namesakeUID is the UID of a rollout of testRollout's name created again.
	namesakeUID = "9b1d0c2e-3333-4c2b-9d7e-000000000003"
	// testSeq is the ordering token (bus.StepRef.Seq) of testRollout's commands.
	testSeq = "4100"
)

// stepToken is the v1alpha1.StepToken of step index of testRollout.
func stepToken(index int32) string {
	return v1alpha1.StepToken(fmt.Sprintf("%s/%d", testRollout, index), testRolloutUID)
}

// testBundle is a small GPU stack: gpu-operator depends on four releases; gpu-readiness is a
// readiness gate.
func testBundle(gpuOperatorMessage string) string {
	return fmt.Sprintf(`apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: gpu-stack, version: 1.2.0}
components:
- name: cert-manager
  namespace: cert-manager
  chart: {path: charts/cert-manager, digest: "sha256:%[2]s"}
  values: {crds: {enabled: true}}
- name: nfd
  namespace: nfd
  chart: {path: charts/nfd, digest: "sha256:%[3]s"}
- name: kube-prometheus-stack
  namespace: monitoring
  chart: {path: charts/kube-prometheus-stack, digest: "sha256:%[4]s"}
- name: nodewright-customizations
  namespace: nodewright
  chart: {path: wrappers/nodewright-customizations, digest: "sha256:%[5]s"}
- name: gpu-operator
  namespace: gpu-operator
  chart: {path: charts/gpu-operator, digest: "sha256:%[6]s"}
  dependsOn: [nfd, cert-manager, nodewright-customizations, kube-prometheus-stack]
  values:
    driver: {enabled: true, version: "580.95.05"}
    toolkit: {enabled: true}
    dcgmExporter: {serviceMonitor: {enabled: true}}
    operator: {defaultRuntime: containerd}
    message: %[1]q
    replicas: 2
- name: gpu-readiness
  namespace: gpu-operator
  chart: {path: wrappers/gpu-readiness, digest: "sha256:%[7]s"}
  dependsOn: [gpu-operator]
  readinessGate: true
`, gpuOperatorMessage, hex('1'), hex('2'), hex('3'), hex('4'), hex('5'), hex('6'))
}

func hex(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// testPlan resolves the test bundle and returns the plan and its ConfigMap.
func testPlan(t testing.TB, gpuOperatorMessage string) (*plan.Plan, *corev1.ConfigMap) {
	t.Helper()
	b, err := plan.ParseBundle([]byte(testBundle(gpuOperatorMessage)))
	if err != nil {
		t.Fatalf("parse test bundle: %v", err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatalf("resolve test plan: %v", err)
	}
	cm, err := p.ConfigMap(testOperatorNS)
	if err != nil {
		t.Fatalf("plan configmap: %v", err)
	}
	return p, cm
}

var testStarted = time.Date(2026, 5, 14, 9, 30, 0, 0, time.UTC)

// applyCmd builds the command of step index for release of plan p.
func applyCmd(p *plan.Plan, release string, index int32, opts ...func(*bus.ApplyCommand)) *bus.ApplyCommand {
	step := bus.StepRef{Rollout: testRollout, Index: index, ID: fmt.Sprintf("%s/%d", testRollout, index),
		Started: testStarted.Add(time.Duration(index) * time.Minute), RolloutUID: testRolloutUID, Seq: testSeq}
	cmd := bus.NewApplyCommand(testRuntime, testRuntimeUID, step, release, v1alpha1.ActionInstall, p.Digest(), false, nil)
	cmd.Header = bus.Header{Type: bus.TypeApplyCommand, ID: fmt.Sprintf("%s/1", step.ID)}
	for _, o := range opts {
		o(cmd)
	}
	return cmd
}

func removeCmd(release string, index int32, opts ...func(*bus.RemoveCommand)) *bus.RemoveCommand {
	step := bus.StepRef{Rollout: testRollout, Index: index, ID: fmt.Sprintf("%s/%d", testRollout, index), Started: testStarted, RolloutUID: testRolloutUID, Seq: testSeq}
	cmd := bus.NewRemoveCommand(testRuntime, testRuntimeUID, step, release)
	cmd.Header = bus.Header{Type: bus.TypeRemoveCommand, ID: fmt.Sprintf("%s/1", step.ID)}
	for _, o := range opts {
		o(cmd)
	}
	return cmd
}
