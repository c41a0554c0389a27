//go:build integration

package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/planner/internal/ocibundle"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/ociregistry"
)

const (
	engineNS        = "argocd"
	repoCredsSecret = "aicr-registry"
)

// TestOCIBundleSource runs the planner on a runtime whose bundle is an OCI artifact in the
// environment's registry (the distribution registry, behind htpasswd): the repo-creds Secret
// holds a stale token at first (Resolved=False Unauthorized), the refresher writes a fresh one
// and reports it (the pull succeeds without a restart: the Secret is read at every pull), the
// stack rolls out; a new digest on the runtime makes a new plan and a rollout to it; a digest
// the registry does not have is BundleNotFound naming the field.
func TestOCIBundleSource(t *testing.T) {
	h := newHarness(t)
	h.deleteRuntime() // an earlier test's
	ctx := context.Background()
	reg := h.env.Registry
	if _, err := h.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: engineNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The bundles are pushed as kubectl aicr bundle push does, under the repo-creds url.
	pusher := ociregistry.New(ociregistry.Options{PlainHTTP: true,
		Credentials: ociregistry.Credentials{Username: registryAuth.Username, Password: registryAuth.Password}})
	repo := ociregistry.Repository{Host: reg.Host, Name: "aicr/bundles/gpu-stack"}
	push := func(tag string, comps []map[string]any) string {
		t.Helper()
		desc, err := pusher.PushArtifact(ctx, ociregistry.Reference{Repository: repo, Tag: tag}, ociregistry.BundleArtifact([]byte(bundleYAML(t, comps))))
		if err != nil {
			t.Fatalf("push bundle %s: %v", tag, err)
		}
		return desc.Digest
	}
	v1 := []map[string]any{component("cert-manager", 1), component("nfd", 1, "cert-manager")}
	d1 := push("1.0.0", v1)
	d2 := push("1.1.0", []map[string]any{v1[0], component("nfd", 2, "cert-manager")})

	const staleToken = "stale-ecr-token"
	secrets := h.core.CoreV1().Secrets(engineNS)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: repoCredsSecret, Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: map[string]string{"type": "oci", "url": "oci://" + reg.Host + "/aicr", "username": "AWS", "password": staleToken,
			"insecureOCIForceHttp": "true"},
	}
	if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	puller := ocibundle.New(ocibundle.Config{
		Secrets: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
			return h.core.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		SecretNamespace: engineNS, SecretName: repoCredsSecret,
	})
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{OCI: &v1alpha1.OCIBundleSource{Repository: repo.String(), Digest: d1}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	stop := h.startPlannerWith(puller)
	defer func() { stop() }()
	defer h.deleteRuntime()

	resolved := func(rt *v1alpha1.ClusterRuntime) *metav1.Condition {
		return meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionResolved)
	}
	got := h.waitRuntime("Resolved=False Unauthorized with the stale token", func(rt *v1alpha1.ClusterRuntime) bool {
		c := resolved(rt)
		return c != nil && c.Reason == v1alpha1.ReasonUnauthorized
	})
	msg := resolved(got).Message
	for _, want := range []string{"spec.bundle.oci.repository", "401", "with the credentials of the repo-creds Secret argocd/aicr-registry"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Resolved message %q: want %q in it", msg, want)
		}
	}
	if strings.Contains(msg, staleToken) || strings.Contains(msg, registryAuth.Password) {
		t.Fatalf("Resolved message %q holds a token", msg)
	}
	h.noCommand("an unresolved bundle")

	// The refresher writes a fresh token and reports it: the next pull uses it.
	fresh, err := secrets.Get(ctx, repoCredsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Data["password"] = []byte(registryAuth.Password)
	if _, err := secrets.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	report := &bus.CredentialsStatus{Mode: "aws", OK: true}
	if err := h.pub.Publish(ctx, bus.SubjectCredentials, "creds/refreshed/1", report); err != nil {
		t.Fatal(err)
	}
	h.order = nil
	h.answer(h.mustNext())
	h.answer(h.mustNext())
	if got, want := strings.Join(h.order, " "), "cert-manager(Install) nfd(Install)"; got != want {
		t.Fatalf("first rollout %s, want %s", got, want)
	}
	got = h.waitRuntime("RolledOut from the OCI bundle", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
	})
	first := got.Status.ActivePlan

	// A person moves the stack: the new digest on the runtime.
	setDigest := func(d string) {
		t.Helper()
		cur := h.runtime()
		cur.Spec.Bundle.OCI.Digest = d
		if _, err := h.kube.UpdateRuntime(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	setDigest(d2)
	h.order = nil
	h.answer(h.mustNext())
	if got, want := strings.Join(h.order, " "), "nfd(Upgrade)"; got != want {
		t.Fatalf("rollout to the new digest %s, want %s", got, want)
	}
	got = h.waitRuntime("RolledOut at the new digest's plan", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut && rt.Status.ActivePlan != first
	})
	// The outcome label is written after the runtime's Ready (it does not delay it).
	r := h.waitRollout(got.Status.Rollout, func(r *v1alpha1.RuntimeRollout) bool {
		return r.Labels[v1alpha1.LabelOutcome] != ""
	})
	if r.Spec.FromDigest != first || r.Spec.ToDigest != got.Status.ActivePlan || r.Labels[v1alpha1.LabelOutcome] != v1alpha1.OutcomeSucceeded {
		t.Fatalf("rollout %s from %s to %s (%s); want from %s to %s, succeeded", r.Name, r.Spec.FromDigest, r.Spec.ToDigest,
			r.Labels[v1alpha1.LabelOutcome], first, got.Status.ActivePlan)
	}

	// A digest the registry does not have.
	missing := ociregistry.Digest([]byte("never pushed"))
	setDigest(missing)
	got = h.waitRuntime("Resolved=False BundleNotFound", func(rt *v1alpha1.ClusterRuntime) bool {
		c := resolved(rt)
		return c != nil && c.Reason == v1alpha1.ReasonBundleNotFound
	})
	if msg := resolved(got).Message; !strings.Contains(msg, "spec.bundle.oci.digest") || !strings.Contains(msg, missing) || !strings.Contains(msg, "MANIFEST_UNKNOWN") {
		t.Fatalf("BundleNotFound message %q: want the field, the digest and the registry's answer", msg)
	}
	if condReason(got, v1alpha1.ConditionStalled) != v1alpha1.ReasonBundleNotFound {
		t.Fatalf("Stalled reason %q, want BundleNotFound", condReason(got, v1alpha1.ConditionStalled))
	}
}
