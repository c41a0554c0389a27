//go:build integration

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/shared/api/crds"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/freeport"
	"github.com/aicr-run/aicr-operator/testkit/testenv"

	"github.com/aicr-run/aicr-operator/cli/internal/check"
)

// installedOperator writes what an installed operator leaves in the API server: the five
// binaries' Deployments and the NATS StatefulSet with every replica ready, the three leader
// Leases just renewed, and the repo-creds Secret with the test registry's login. There is no
// controller in this environment, so the statuses stay as written.
func installedOperator(t *testing.T, env *testenv.Env, kc kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, env, opNamespace)
	ensureNamespace(t, env, v1alpha1.DefaultEngineNamespace)
	labels := func(c string) map[string]string {
		return map[string]string{"app.kubernetes.io/part-of": "aicr-operator", "app.kubernetes.io/component": c}
	}
	two := int32(2)
	for _, b := range check.BinaryNames {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator-" + b, Namespace: opNamespace, Labels: labels(b)},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels(b)},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(b)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: b, Image: "ghcr.io/aicr-run/" + b + ":v0.1.0"}}}}},
		}
		created, err := kc.AppsV1().Deployments(opNamespace).Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
		if _, err := kc.AppsV1().Deployments(opNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kc.AppsV1().Deployments(opNamespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
		})
	}
	three := int32(3)
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator-nats", Namespace: opNamespace, Labels: labels("nats")},
		Spec: appsv1.StatefulSetSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: labels("nats")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels("nats")},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nats", Image: "nats:2"}}}}},
	}
	created, err := kc.AppsV1().StatefulSets(opNamespace).Create(ctx, ss, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3}
	if _, err := kc.AppsV1().StatefulSets(opNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.AppsV1().StatefulSets(opNamespace).Delete(context.Background(), ss.Name, metav1.DeleteOptions{})
	})
	for _, b := range leaderBinaries {
		renewLease(t, kc, v1alpha1.LeaseName(b), time.Now())
	}
	writeRepoCreds(t, kc, env, registryAuth.Password)
}

// renewLease writes the Lease as a leader renewing it at renewed, for 15 s.
func renewLease(t *testing.T, kc kubernetes.Interface, name string, renewed time.Time) {
	t.Helper()
	ctx := context.Background()
	holder, secs := name+"-7d9f-x", int32(15)
	at := metav1.NewMicroTime(renewed)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &at, AcquireTime: &at}}
	got, err := kc.CoordinationV1().Leases(opNamespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = kc.CoordinationV1().Leases(opNamespace).Create(ctx, l, metav1.CreateOptions{})
		t.Cleanup(func() {
			_ = kc.CoordinationV1().Leases(opNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	case err == nil:
		got.Spec = l.Spec
		_, err = kc.CoordinationV1().Leases(opNamespace).Update(ctx, got, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// writeRepoCreds writes the repo-creds Secret for the test registry with password.
func writeRepoCreds(t *testing.T, kc kubernetes.Interface, env *testenv.Env, password string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultRepoCredsSecret, Namespace: v1alpha1.DefaultEngineNamespace, Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
		StringData: map[string]string{"type": "oci", "url": "oci://" + env.Registry.Host + "/aicr", "username": registryAuth.Username,
			"password": password, "insecureOCIForceHttp": "true"},
	}
	if _, err := kc.CoreV1().Secrets(v1alpha1.DefaultEngineNamespace).Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = kc.CoreV1().Secrets(v1alpha1.DefaultEngineNamespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	} else {
		t.Cleanup(func() {
			_ = kc.CoreV1().Secrets(v1alpha1.DefaultEngineNamespace).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		})
	}
}

// checkStates runs check -o json and returns each check's state and the exit code.
func checkStates(t *testing.T, env *testenv.Env, args ...string) (map[string]check.State, int, string) {
	t.Helper()
	code, stdout, stderr := kubectl(t, env, append([]string{"check", "-o", "json"}, args...)...)
	var list struct {
		Items []check.Result `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("check -o json: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	states := map[string]check.State{}
	var msgs []string
	for _, r := range list.Items {
		states[r.Name] = r.State
		msgs = append(msgs, fmt.Sprintf("%s %s: %s", r.Name, r.State, r.Message))
	}
	return states, code, strings.Join(msgs, "\n")
}

// check judges an installed operator on the real API server and the real registry: every check
// passes but the webhook's, which this environment does not run; each failure gives its own exit
// code: a webhook the API server cannot call, a lapsed leader Lease, a password the registry
// refuses.
func TestCheck(t *testing.T) {
	env := testenv.Current(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	installedOperator(t, env, kc)

	code, stdout, _ := kubectl(t, env, "check")
	if code != check.ExitCode(check.Webhook) {
		t.Fatalf("check: exit %d, want %d (no webhook configuration):\n%s", code, check.ExitCode(check.Webhook), stdout)
	}
	for _, want := range []string{"[ok]    crds", "[FAIL]  webhook", "plans.admission.aicr.run is missing", "[ok]    binaries", "[ok]    nats       StatefulSet statefulset/aicr-operator-nats ready (3/3)",
		"[ok]    leaders    aicr-planner by aicr-planner-7d9f-x", "[ok]    argocd     Application and AppProject CRDs served", "[ok]    repo-creds", "accepts its credentials", "1 check(s) failed; exit 4"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check output lacks %q:\n%s", want, stdout)
		}
	}
	if states, code, msgs := checkStates(t, env, "--skip", "webhook"); code != 0 || states[check.Webhook] != check.Skipped {
		t.Errorf("check --skip webhook: exit %d, want 0:\n%s", code, msgs)
	}

	// The registry refuses a wrong password; the Secret's value is never printed.
	writeRepoCreds(t, kc, env, "not-the-password")
	states, code, msgs := checkStates(t, env, "--skip", "webhook")
	if code != check.ExitCode(check.RepoCreds) || states[check.RepoCreds] != check.Fail || !strings.Contains(msgs, "the registry refuses Secret argocd/aicr-registry's credentials") {
		t.Errorf("wrong password: exit %d:\n%s", code, msgs)
	}
	if strings.Contains(msgs, "not-the-password") {
		t.Errorf("check printed the password:\n%s", msgs)
	}
	writeRepoCreds(t, kc, env, registryAuth.Password)

	// A leader that stopped renewing: exit 7, before repo-creds.
	renewLease(t, kc, v1alpha1.LeaseName(v1alpha1.BinaryReadiness), time.Now().Add(-time.Minute))
	states, code, msgs = checkStates(t, env, "--skip", "webhook")
	if code != check.ExitCode(check.Leaders) || states[check.Leaders] != check.Fail || !strings.Contains(msgs, "Lease aicr-readiness held by aicr-readiness-7d9f-x was last renewed") {
		t.Errorf("lapsed lease: exit %d:\n%s", code, msgs)
	}
	renewLease(t, kc, v1alpha1.LeaseName(v1alpha1.BinaryReadiness), time.Now())

	// A webhook configuration whose endpoint does not answer: the API server cannot call it.
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/validate", port)
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNoneOnDryRun
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "aicr-check-test"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: plansWebhook, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"operator.aicr.run/role": "plan"}},
			FailurePolicy:  &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
	if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})
	// The API server's webhook configuration cache takes the new configuration in a moment: wait
	// for the answer that proves it called the webhook.
	err = testenv.WaitFor(context.Background(), commandTimeout, "check to call the webhook", func(context.Context) (bool, error) {
		states, code, msgs = checkStates(t, env)
		return strings.Contains(msgs, "cannot reach the webhook"), nil
	})
	if err != nil || code != check.ExitCode(check.Webhook) || states[check.Webhook] != check.Fail {
		t.Errorf("unreachable webhook: %v, exit %d:\n%s", err, code, msgs)
	}
}

// Without the operator's CRDs, status and describe say so plainly (not "create it first"), and
// check fails its first check with exit 3.
func TestWithoutTheCRDs(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	if err := env.DeleteCRDs(ctx, "clusterruntimes.operator.aicr.run", "runtimerollouts.operator.aicr.run"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		names, err := fs.Glob(crds.FS, "*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var docs [][]byte
		for _, n := range names {
			data, err := fs.ReadFile(crds.FS, n)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, data)
		}
		if err := env.InstallCRDs(context.Background(), docs...); err != nil {
			t.Fatal(err)
		}
	})
	for _, args := range [][]string{{"status"}, {"describe", "r-1"}, {"history"}} {
		code, stdout, stderr := kubectl(t, env, args...)
		if code != 1 || !strings.Contains(stderr, "the API server does not serve") || !strings.Contains(stderr, "the operator's CRDs are not installed") || strings.Contains(stderr+stdout, "create it first") {
			t.Errorf("%v without the CRDs: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	states, code, msgs := checkStates(t, env)
	if code != check.ExitCode(check.CRDs) || states[check.CRDs] != check.Fail || !strings.Contains(msgs, "does not serve clusterruntimes.operator.aicr.run, runtimerollouts.operator.aicr.run") {
		t.Errorf("check without the CRDs: exit %d:\n%s", code, msgs)
	}
}
