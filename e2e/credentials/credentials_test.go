//go:build e2e

package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. A refresh happens every refreshInterval (jittered earlier); the rest is
// headroom for a loaded 2-core machine.
const (
	// refreshTimeout bounds the wait for credrefresher to write what the endpoint hands out.
	refreshTimeout = 3 * refreshInterval
	// unavailableTimeout bounds the wait for a failed refresh of a 40s token: the next refresh is
	// due at half its life.
	unavailableTimeout = time.Minute
	// staleTimeout bounds the wait for the token to expire and Stale to be reported.
	staleTimeout = 90 * time.Second
	// recoverTimeout bounds the wait for a retry to succeed once the endpoint is back: the
	// backoff after a few failures is 40s, jittered.
	recoverTimeout = 2 * time.Minute
	// shortLifetime is the life of the tokens the endpoint hands out in the staleness test.
	shortLifetime = 40 * time.Second
	// longLifetime outlives the planner's 15m action timeout, so steps may start.
	longLifetime = time.Hour
)

const annotationExpiresAt = "operator.aicr.run/token-expires-at"

// planted are the registry passwords handed out so far; TestTokenNeverLeaks looks for each, and
// for its ECR token, where no secret may be.
var planted struct {
	sync.Mutex
	passwords []string
}

func plant(p string) {
	planted.Lock()
	defer planted.Unlock()
	planted.passwords = append(planted.passwords, p)
}

// The runtime rolls out with aws-mode credentials: credrefresher wrote the token the fake ECR
// endpoint handed out into the repo-creds Secret, in the shape Argo CD reads, and Argo CD pulled
// every chart from the password-protected registry with it: the per-chart repository Secrets
// carry no credentials, and the registry answers nobody without the AWS user's password.
func TestRuntimeRollsOutWithECRCredentials(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	ecr := s.ECR()
	if ecr == nil {
		t.Fatal("the stack runs without Options.AWSAuth: no fake ECR endpoint")
	}
	password := s.Env.Registry.Auth.Password
	plant(password)
	if got := s.Env.Registry.Auth.Username; got != stack.ECRUsername {
		t.Fatalf("registry user %q, want %q", got, stack.ECRUsername)
	}
	if ok, err := s.RegistryAccepts(ctx, "", ""); err != nil || ok {
		t.Fatalf("the registry accepts anonymous requests (%v, %v): Argo CD would not need the Secret", ok, err)
	}
	for _, c := range stack.ExampleComponents() {
		sec, err := s.Kube.CoreV1().Secrets(stack.EngineNamespace).Get(ctx, "aicr-repo-"+c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sec.Data["username"]; ok {
			t.Errorf("repository Secret %s carries a username: Argo CD would not use the repo-creds Secret", sec.Name)
		}
		if _, ok := sec.Data["password"]; ok {
			t.Errorf("repository Secret %s carries a password: Argo CD would not use the repo-creds Secret", sec.Name)
		}
	}

	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	rt := stacktest.RolledOut(t, s, bundle, stack.DefaultRuntimeSpec())

	sec := waitSecretPassword(t, s, password)
	want := map[string]string{
		"type": "oci", "url": "oci://" + s.Repository, "username": stack.ECRUsername,
		"password": password, "insecureOCIForceHttp": "true",
	}
	for k, v := range want {
		if got := string(sec.Data[k]); got != v {
			if k == "password" {
				t.Errorf("Secret %s: data.password is not the password the endpoint handed out", sec.Name)
			} else {
				t.Errorf("Secret %s: data.%s = %q, want %q", sec.Name, k, got, v)
			}
		}
	}
	if got := sec.Labels[v1alpha1.LabelArgoSecretType]; got != v1alpha1.ArgoSecretTypeRepoCreds {
		t.Errorf("Secret %s: label %s = %q, want %s", sec.Name, v1alpha1.LabelArgoSecretType, got, v1alpha1.ArgoSecretTypeRepoCreds)
	}
	if exp := secretExpiry(t, sec); time.Until(exp) < 30*time.Minute {
		t.Errorf("Secret %s: token expires at %s, want about %s from now", sec.Name, exp, longLifetime)
	}
	// The metric an alert on the token's expiry reads says the same expiry as the Secret.
	err = testenv.WaitFor(t.Context(), time.Minute, "aicr_credrefresher_token_expiry_timestamp_seconds at the Secret's expiry", func(ctx context.Context) (bool, error) {
		m, err := s.Scrape(ctx, "credrefresher")
		if err != nil {
			return false, err
		}
		got, ok := m.Sum("aicr_credrefresher_token_expiry_timestamp_seconds", nil)
		cur, err := repoCreds(ctx, s)
		if err != nil {
			return false, err
		}
		exp, perr := time.Parse(time.RFC3339, cur.Annotations[annotationExpiresAt])
		if !ok || perr != nil || got != float64(exp.Unix()) {
			return false, fmt.Errorf("metric %v (found %v), Secret's expiry %s (%v)", got, ok, exp, perr)
		}
		return true, nil
	})
	if err != nil {
		t.Error(err)
	}
	if n := ecr.Calls(); n == 0 {
		t.Error("the fake ECR endpoint saw no call")
	}
	if r := ecr.Rejected(); len(r) > 0 {
		t.Errorf("the fake ECR endpoint rejected %d requests, first: %s", len(r), r[0])
	}

	if c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionResolved); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Resolved = %+v, want True", c)
	}
	if cs := rt.Status.Credentials; cs == nil || cs.Mode != "aws" || cs.ExpiresAt == nil || cs.Message != "" {
		t.Errorf("status.credentials = %+v, want mode aws with an expiry and no message", cs)
	}
	for _, c := range stack.ExampleComponents() {
		app := stacktest.Application(t, s, c.Name)
		if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != s.Digests[c.Name] {
			t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", c.Name, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, s.Digests[c.Name])
		}
	}
}

// The registry's password changes and the endpoint hands out the new one: after the next
// refresh the Secret holds it, the old password no longer opens the registry, and a chart Argo
// CD has never pulled (a new digest of kubeflow-trainer) still syncs, so Argo CD pulled it with
// the rotated credentials.
func TestRotatedPasswordReachesArgoCD(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	ecr := s.ECR()
	if ecr == nil {
		t.Fatal("the stack runs without Options.AWSAuth: no fake ECR endpoint")
	}
	old := s.Env.Registry.Auth.Password
	rotated := stack.RandomPassword()
	plant(rotated)
	if err := s.RotateRegistryPassword(ctx, rotated); err != nil {
		t.Fatal(err)
	}
	ecr.SetPassword(rotated)
	waitSecretPassword(t, s, rotated)
	if ok, err := s.RegistryAccepts(ctx, stack.ECRUsername, old); err != nil || ok {
		t.Fatalf("the registry still accepts the old password (%v, %v)", ok, err)
	}

	// A new digest of one leaf chart: no cache of Argo CD's holds it, it must be pulled.
	const release = "kubeflow-trainer"
	before, err := s.Runtime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digest := pushNewVersion(t, s, release, "1.0.1-rotated")
	digests := maps.Clone(s.Digests)
	digests[release] = digest
	bundle, err := stack.BundleYAML("gpu-stack", "1.0.1", stack.ExampleComponents(), digests)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	rt := waitNewPlanRolledOut(t, s, before.Status.ActivePlan)
	app := stacktest.Application(t, s, release)
	if app.Status.Sync.Status != "Synced" || app.Status.Health.Status != "Healthy" || app.Status.Sync.Revision != digest {
		t.Errorf("%s: %s/%s at %s, want Synced/Healthy at the new digest %s", release, app.Status.Sync.Status, app.Status.Health.Status, app.Status.Sync.Revision, digest)
	}
	if app.Spec.Source == nil || app.Spec.Source.TargetRevision != digest {
		t.Errorf("%s: source %+v, want targetRevision %s", release, app.Spec.Source, digest)
	}
	t.Logf("plan %s rolled out with the rotated password", rt.Status.ActivePlan)
}

// The endpoint fails (HTTP 500) while the token in the Secret still lasts: the runtime reports
// Resolved=False RegistryCredentialsUnavailable; once the token expired, RegistryCredentialsStale;
// when the endpoint answers again, the next retry writes a fresh token and clears it.
func TestStaleTokenReportedAndCleared(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	ecr := s.ECR()
	if ecr == nil {
		t.Fatal("the stack runs without Options.AWSAuth: no fake ECR endpoint")
	}
	t.Cleanup(func() { ecr.SetFailing(false); ecr.SetLifetime(longLifetime) })

	// Short tokens first, so one expires soon after the endpoint starts failing.
	ecr.SetLifetime(shortLifetime)
	var expiry time.Time
	err := testenv.WaitFor(ctx, refreshTimeout, "a short-lived token in Secret "+stack.RepoCredsSecret, func(ctx context.Context) (bool, error) {
		sec, err := repoCreds(ctx, s)
		if err != nil {
			return false, err
		}
		exp, err := time.Parse(time.RFC3339, sec.Annotations[annotationExpiresAt])
		if err != nil {
			return false, err
		}
		expiry = exp
		return time.Until(exp) <= shortLifetime, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ecr.SetFailing(true)

	rt, err := s.WaitCondition(ctx, unavailableTimeout, v1alpha1.ConditionResolved, metav1.ConditionFalse, v1alpha1.ReasonRegistryCredentialsUnavailable)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); !now.Before(expiry) {
		t.Fatalf("Unavailable was seen only at %s, after the token expired at %s", now, expiry)
	}
	c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionResolved)
	for _, want := range []string{"500", "valid until"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Resolved message %q does not mention %q", c.Message, want)
		}
	}

	rt, err = s.WaitCondition(ctx, staleTimeout, v1alpha1.ConditionResolved, metav1.ConditionFalse, v1alpha1.ReasonRegistryCredentialsStale)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(expiry) {
		t.Errorf("Stale reported at %s, before the token expired at %s", now, expiry)
	}
	c = meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionResolved)
	if !strings.Contains(c.Message, "expired at") {
		t.Errorf("Resolved message %q does not say the token expired", c.Message)
	}
	if cs := rt.Status.Credentials; cs == nil || cs.ExpiresAt == nil || cs.ExpiresAt.After(time.Now()) || cs.Message == "" {
		t.Errorf("status.credentials = %+v, want the past expiry and a message", cs)
	}
	if st := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionStalled); st == nil || st.Status != metav1.ConditionTrue || st.Reason != v1alpha1.ReasonRegistryCredentialsStale {
		t.Errorf("Stalled = %+v, want True %s", st, v1alpha1.ReasonRegistryCredentialsStale)
	}

	ecr.SetLifetime(longLifetime)
	ecr.SetFailing(false)
	rt, err = s.WaitCondition(ctx, recoverTimeout, v1alpha1.ConditionResolved, metav1.ConditionTrue, v1alpha1.ReasonResolved)
	if err != nil {
		t.Fatal(err)
	}
	if cs := rt.Status.Credentials; cs == nil || cs.Message != "" || cs.ExpiresAt == nil || time.Until(cs.ExpiresAt.Time) < 30*time.Minute {
		t.Errorf("status.credentials = %+v, want a fresh token and no message", cs)
	}
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}
}

// No planted password, nor its ECR token, appears in any process's log under <Dir>/logs, in the
// ClusterRuntime, in a RuntimeRollout or in an Event.
func TestTokenNeverLeaks(t *testing.T) {
	checkNoLeaks(t, stacktest.Need(t))
}

// checkNoLeaks scans the logs, the runtime, the rollouts and the Events for every planted
// password and its ECR token.
func checkNoLeaks(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := t.Context()
	planted.Lock()
	passwords := append([]string(nil), planted.passwords...)
	planted.Unlock()
	if len(passwords) == 0 { // run alone: at least the registry's current password
		passwords = []string{s.Env.Registry.Auth.Password}
	}
	secrets := map[string]string{}
	for i, p := range passwords {
		secrets[fmt.Sprintf("password #%d", i+1)] = p
		secrets[fmt.Sprintf("ECR token of password #%d", i+1)] = stack.ECRToken(p)
	}
	check := func(where string, data []byte) {
		t.Helper()
		for what, v := range secrets {
			if strings.Contains(string(data), v) {
				t.Errorf("%s holds %s", where, what) // never print the value
			}
		}
	}

	logs, err := filepath.Glob(filepath.Join(s.Dir, "logs", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var sawRefresh bool
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		check("log "+filepath.Base(path), data)
		if filepath.Base(path) == "credrefresher.log" && strings.Contains(string(data), "refreshed registry credentials") {
			sawRefresh = true
		}
	}
	if !sawRefresh {
		t.Errorf("credrefresher.log among %d logs has no refresh: the scan proves nothing", len(logs))
	}

	rt, err := s.Runtime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("ClusterRuntime "+rt.Name, mustJSON(t, rt))
	ros, err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range ros.Items {
		check("RuntimeRollout "+ro.GetName(), mustJSON(t, ro.Object))
	}
	events, err := s.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no Events at all: the scan proves nothing")
	}
	for _, ev := range events.Items {
		check(fmt.Sprintf("Event %s/%s (%s)", ev.Namespace, ev.Name, ev.Reason), mustJSON(t, ev))
	}
	t.Logf("scanned %d logs, the runtime, %d rollouts and %d Events for %d planted passwords", len(logs), len(ros.Items), len(events.Items), len(passwords))
}

func repoCreds(ctx context.Context, s *stack.Stack) (*corev1.Secret, error) {
	return s.Kube.CoreV1().Secrets(stack.EngineNamespace).Get(ctx, stack.RepoCredsSecret, metav1.GetOptions{})
}

// waitSecretPassword waits until the repo-creds Secret holds password and returns it.
func waitSecretPassword(t *testing.T, s *stack.Stack, password string) *corev1.Secret {
	t.Helper()
	var sec *corev1.Secret
	err := testenv.WaitFor(t.Context(), refreshTimeout, "Secret "+stack.RepoCredsSecret+" to hold the password the endpoint hands out", func(ctx context.Context) (bool, error) {
		var err error
		sec, err = repoCreds(ctx, s)
		return err == nil && string(sec.Data["password"]) == password, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func secretExpiry(t *testing.T, sec *corev1.Secret) time.Time {
	t.Helper()
	exp, err := time.Parse(time.RFC3339, sec.Annotations[annotationExpiresAt])
	if err != nil {
		t.Fatalf("Secret %s: annotation %s: %v", sec.Name, annotationExpiresAt, err)
	}
	return exp
}

// pushNewVersion pushes the example chart of release under a new version (so a new digest) to
// the same repository and returns its digest.
func pushNewVersion(t *testing.T, s *stack.Stack, release, version string) string {
	t.Helper()
	var comp stack.ExampleComponent
	for _, c := range stack.ExampleComponents() {
		if c.Name == release {
			comp = c
		}
	}
	root, err := stack.ChartsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), release)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, comp.Dir, comp.Name))); err != nil {
		t.Fatal(err)
	}
	chartYAML := filepath.Join(dir, "Chart.yaml")
	raw, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "version:") {
			lines[i] = "version: " + version
		}
	}
	if err := os.WriteFile(chartYAML, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Env.PushChart(t.Context(), dir, stack.RepositoryPath+"/"+comp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Digest == s.Digests[release] {
		t.Fatalf("the new version of %s has the old digest %s", release, ch.Digest)
	}
	return ch.Digest
}

// waitNewPlanRolledOut waits until the runtime is Ready=True/RolledOut at a plan other than prev.
func waitNewPlanRolledOut(t *testing.T, s *stack.Stack, prev string) *v1alpha1.ClusterRuntime {
	t.Helper()
	var last *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(t.Context(), stacktest.RolloutTimeout, "a new plan rolled out", func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil {
			return false, nil
		}
		last = rt
		c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
		return rt.Status.ActivePlan != prev && rt.Status.ActivePlan == rt.Status.DesiredPlan &&
			c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRolledOut, nil
	})
	if err != nil {
		if last != nil {
			t.Fatalf("%v (runtime: %s)", err, stack.Blocker(last))
		}
		t.Fatal(err)
	}
	return last
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
