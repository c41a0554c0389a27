//go:build integration

package app

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/admission/internal/webhook"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

// webhookActiveTimeout bounds the API server picking up the webhook configuration.
const webhookActiveTimeout = 60 * time.Second

const integrationBundle = `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: gpu-stack, version: 1.2.0}
components:
  - name: gpu-operator
    chart: {path: charts/gpu-operator, digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
    namespace: gpu-operator
    values: {driver: {version: "580.65.06"}}
`

// shippedWebhookConfig is admission/config/webhook.yaml, each webhook pointed at url with caPEM
// instead of the in-cluster Service: the test runs the configuration the chart ships.
func shippedWebhookConfig(t *testing.T, url string, caPEM []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	data, err := os.ReadFile("../../config/webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("decode config/webhook.yaml: %v", err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	return &cfg
}

// TestRealAPIServerCallsTheWebhook runs the webhook binary with the shipped configuration behind
// a real kube-apiserver: a write by the impersonated operator service account to an Application
// armed with the resources finalizer is denied, the same write by the admin passes, and a
// ClusterRuntime with an unknown override path is refused with the field path.
func TestRealAPIServerCallsTheWebhook(t *testing.T) {
	env := testenv.Current(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)

	for _, ns := range []string{"argocd", "aicr-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("aicr-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-bundle"}, Data: map[string]string{"bundle.yaml": integrationBundle},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC lets the applier's service account write Applications: only admission stops it.
	if _, err := cs.RbacV1().Roles("argocd").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator-applier"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("argocd").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator-applier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "aicr-operator-applier"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "aicr-system", Name: "aicr-operator-applier"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The webhook binary, its real Run, with a serving certificate for 127.0.0.1.
	nats := natstest.Start(t)
	pair := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := pair.Write(t, t.TempDir())
	hook := servicetest.FreeAddr(t)
	runCtx, cancel := context.WithCancel(ctx)
	exit := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		exit <- Main(runCtx, []string{
			"--nats-url=" + nats.URL, "--kubeconfig=" + env.Kubeconfig,
			"--health-addr=" + servicetest.FreeAddr(t), "--metrics-addr=" + servicetest.FreeAddr(t), "--webhook-addr=" + hook,
			"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile, "--namespace=aicr-system",
			"--operator-identities=" + applier + ",system:serviceaccount:aicr-system:aicr-operator-planner",
			"--log-level=warn",
		}, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("webhook exit code %d: %s", code, stderr.String())
		}
	})
	whc := shippedWebhookConfig(t, "https://"+hook+webhook.Path, pair.CAPEM)
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), whc.Name, metav1.DeleteOptions{})
	})

	// ClusterRuntime with an unknown override path: refused with the field path. Polled, as the
	// API server takes a moment to start calling a new webhook.
	rt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.aicr.run/v1alpha1", "kind": "ClusterRuntime",
		"metadata": map[string]any{"name": "cluster"},
		"spec": map[string]any{
			"bundle":    map[string]any{"configMap": map[string]any{"name": "gpu-bundle"}},
			"overrides": []any{map[string]any{"component": "gpu-operator", "path": "driver.versoin", "value": "590.1"}},
		},
	}}
	wantRuntime := `admission webhook "runtime.admission.aicr.run" denied the request: spec.overrides[0].path: component gpu-operator: driver has no key "versoin"`
	servicetest.Poll(t, webhookActiveTimeout, "ClusterRuntime refused by the webhook", func() error {
		_, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Create(ctx, rt, metav1.CreateOptions{})
		if err == nil {
			_ = dyn.Resource(v1alpha1.ClusterRuntimeResource).Delete(ctx, "cluster", metav1.DeleteOptions{})
			return errString("created; want refused")
		}
		if !strings.Contains(err.Error(), wantRuntime) {
			return err
		}
		return nil
	})

	// A runtime naming an OCI bundle passes: the CRD checks its repository and digest, the
	// planner pulls it (the webhook has no registry credentials).
	ociRuntime := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.aicr.run/v1alpha1", "kind": "ClusterRuntime",
		"metadata": map[string]any{"name": "cluster"},
		"spec": map[string]any{"bundle": map[string]any{"oci": map[string]any{
			"repository": "registry.example.com/aicr/bundles/gpu-stack",
			"digest":     "sha256:" + strings.Repeat("c", 64),
		}}},
	}}
	if _, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Create(ctx, ociRuntime, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a runtime with spec.bundle.oci: %v", err)
	}
	if err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Delete(ctx, "cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The admin arms an Application with the resources finalizer.
	apps := dyn.Resource(testenv.ApplicationGVR).Namespace("argocd")
	appObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "gpu-operator", "finalizers": []any{v1alpha1.ArgoResourcesFinalizer},
			"labels": map[string]any{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		"spec": map[string]any{
			"project":     "aicr",
			"source":      map[string]any{"repoURL": "oci://registry.example.com/aicr/charts/gpu-operator", "path": ".", "targetRevision": "sha256:1"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "gpu-operator"},
		},
	}}
	if _, err := apps.Create(ctx, appObj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creates an armed Application: %v", err)
	}

	// The operator's service account writes it: denied by the webhook, naming the field.
	patch := []byte(`{"metadata":{"annotations":{"operator.aicr.run/step":"r-1/1"}}}`)
	asApplier := dynamic.NewForConfigOrDie(env.ServiceAccountConfig("aicr-system", "aicr-operator-applier")).
		Resource(testenv.ApplicationGVR).Namespace("argocd")
	_, err := asApplier.Patch(ctx, "gpu-operator", "application/merge-patch+json", patch, metav1.PatchOptions{})
	wantApp := `admission webhook "operator-applications.admission.aicr.run" denied the request: metadata.finalizers: Application argocd/gpu-operator carries the finalizer resources-finalizer.argocd.argoproj.io without the annotation operator.aicr.run/delete-rollout`
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantApp) {
		t.Fatalf("operator's patch of an armed Application: %v; want forbidden with %q", err, wantApp)
	}
	if err := asApplier.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), wantApp) {
		t.Fatalf("operator's delete of an armed Application: %v; want forbidden with %q", err, wantApp)
	}

	// The same write by the admin passes.
	if _, err := apps.Patch(ctx, "gpu-operator", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("admin's patch: %v", err)
	}

	// A delete-rollout marker is checked against the rollout it names: while rollout r-1 does
	// not exist (a marker set by hand), the operator's write and delete are still denied.
	remove := []byte(`{"metadata":{"annotations":{"operator.aicr.run/delete-rollout":"r-1"}}}`)
	if _, err := apps.Patch(ctx, "gpu-operator", "application/merge-patch+json", remove, metav1.PatchOptions{}); err != nil {
		t.Fatalf("admin sets the marker by hand: %v", err)
	}
	wantMarker := `carries the finalizer resources-finalizer.argocd.argoproj.io and the annotation operator.aicr.run/delete-rollout=r-1, but rollout r-1 does not exist`
	if _, err := asApplier.Patch(ctx, "gpu-operator", "application/merge-patch+json", patch, metav1.PatchOptions{}); err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantMarker) {
		t.Fatalf("operator's patch of an Application with a hand-set marker: %v; want forbidden with %q", err, wantMarker)
	}
	if err := asApplier.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), wantMarker) {
		t.Fatalf("operator's delete of an Application with a hand-set marker: %v; want forbidden with %q", err, wantMarker)
	}

	// The approved Remove sequence passes while r-1's Remove step of the release is in
	// progress: annotate with delete-rollout, then delete.
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.aicr.run/v1alpha1", "kind": "RuntimeRollout",
		"metadata": map[string]any{"name": "r-1"},
		"spec":     map[string]any{"runtime": "cluster", "runtimeUID": "uid-1"},
	}}
	created, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Create(ctx, ro, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create rollout r-1: %v", err)
	}
	created.Object["status"] = map[string]any{"phase": "Progressing", "steps": []any{map[string]any{
		"index": int64(1), "release": "gpu-operator", "action": "Remove", "state": "InProgress", "startedAt": "2026-12-01T10:00:00Z"}}}
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("rollout r-1 removes gpu-operator: %v", err)
	}
	if _, err := asApplier.Patch(ctx, "gpu-operator", "application/merge-patch+json", remove, metav1.PatchOptions{}); err != nil {
		t.Fatalf("operator's Remove annotation: %v", err)
	}
	if err := asApplier.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("operator's Remove delete: %v", err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
