//go:build integration

package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr/ecrtest"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts.
const (
	readyTimeout    = 30 * time.Second
	secretTimeout   = 30 * time.Second
	statusTimeout   = 30 * time.Second
	shutdownTimeout = 30 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

// binary is one run of Main.
type binary struct {
	healthURL, metricsURL string
	log                   *os.File
	cancel                context.CancelFunc
	done                  chan struct{} // closed when Main returned
	code                  int           // Main's exit code, once done
}

// start runs Main with args plus the cluster, health and metrics flags, logging to a file.
func start(t *testing.T, env *testenv.Env, args ...string) *binary {
	t.Helper()
	hp, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mp, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	b := &binary{healthURL: fmt.Sprintf("http://127.0.0.1:%d", hp), metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp),
		log: logf, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	args = append([]string{"--kubeconfig", env.Kubeconfig, "--health-addr", fmt.Sprintf("127.0.0.1:%d", hp),
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp), "--log-level", "trace"}, args...)
	go func() {
		defer close(b.done)
		b.code = Main(ctx, args, logf)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.done:
		case <-time.After(shutdownTimeout):
			t.Errorf("Main did not return within %s of cancel", shutdownTimeout)
		}
	})
	return b
}

// stop cancels the binary and returns its exit code and its whole log.
func (b *binary) stop(t *testing.T) (int, string) {
	t.Helper()
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(shutdownTimeout):
		t.Fatalf("Main did not return within %s of cancel", shutdownTimeout)
	}
	raw, err := os.ReadFile(b.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b.code, string(raw)
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func namespaces(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create namespace %s: %v", n, err)
		}
	}
}

// credentialsStatuses returns the statuses published so far.
func credentialsStatuses(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	s, err := js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		if m.Subject == bus.SubjectCredentials {
			out = append(out, string(m.Data))
		}
	}
	return out, nil
}

func TestBinaryWritesTheSecretBecomesReadyAndStopsCleanly(t *testing.T) {
	env := testenv.Current(t)
	ecrtest.Isolate(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	namespaces(t, cs, "it-aws-argocd", "it-aws-system")
	password := ecrtest.Password("integration")
	srv := ecrtest.New(t, func(int) ecrtest.Reply {
		return ecrtest.Reply{Token: ecrtest.Token("AWS", password), ExpiresAt: time.Now().Add(12 * time.Hour)}
	})
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	if _, err := dispatch.EnsureSetup(t.Context(), js, 1); err != nil { // the planner's part
		t.Fatal(err)
	}

	b := start(t, env, "--nats-url", ns.URL, "--registry-auth", "aws", "--registry-repository", "127.0.0.1:5000/aicr",
		"--aws-region", "us-west-2", "--ecr-endpoint", srv.URL, "--insecure-oci-force-http",
		"--engine-namespace", "it-aws-argocd", "--namespace", "it-aws-system", "--leader-elect", "--identity", "it-1")

	err := testenv.WaitFor(t.Context(), readyTimeout, "/readyz ready", func(ctx context.Context) (bool, error) {
		code, _, err := get(ctx, b.healthURL+"/readyz")
		return code == http.StatusOK, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var secret *corev1.Secret
	err = testenv.WaitFor(t.Context(), secretTimeout, "Secret it-aws-argocd/aicr-registry written", func(ctx context.Context) (bool, error) {
		secret, err = cs.CoreV1().Secrets("it-aws-argocd").Get(ctx, "aicr-registry", metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"type": "oci", "url": "oci://127.0.0.1:5000/aicr", "username": "AWS", "password": password, "insecureOCIForceHttp": "true"}
	for k, v := range want {
		if string(secret.Data[k]) != v {
			t.Errorf("data.%s is not the expected value", k)
		}
	}
	if len(secret.Data) != len(want) || secret.Labels["argocd.argoproj.io/secret-type"] != "repo-creds" {
		t.Errorf("Secret has keys %d (want %d) and labels %v", len(secret.Data), len(want), secret.Labels)
	}
	if _, err := cs.CoordinationV1().Leases("it-aws-system").Get(t.Context(), "aicr-credrefresher", metav1.GetOptions{}); err != nil {
		t.Errorf("no leader lease: %v", err)
	}
	var published []string
	err = testenv.WaitFor(t.Context(), statusTimeout, "credentials status published", func(ctx context.Context) (bool, error) {
		published, err = credentialsStatuses(ctx, js)
		return len(published) > 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(published[0], `"ok":true`) || !strings.Contains(published[0], `"expires_at"`) {
		t.Errorf("status %s, want ok with an expiry", published[0])
	}
	_, page, err := get(t.Context(), b.metricsURL)
	if err != nil || !strings.Contains(page, "aicr_credrefresher_token_expiry_timestamp_seconds") {
		t.Errorf("metrics page lacks the expiry (%v)", err)
	}

	code, log := b.stop(t)
	if code != 0 {
		t.Errorf("exit code %d after cancel, want 0; log:\n%s", code, log)
	}
	if !strings.Contains(log, "refreshed registry credentials") {
		t.Errorf("log lacks the refresh:\n%s", log)
	}
	token := ecrtest.Token("AWS", password)
	for what, text := range map[string]string{"log": log, "metrics": page, "published status": strings.Join(published, "\n")} {
		if strings.Contains(text, password) || strings.Contains(text, token) || strings.Contains(text, password[:40]) {
			t.Errorf("the %s shows the token", what)
		}
	}
}

func TestBinaryStaticReportsASecretMissingItsLabel(t *testing.T) {
	env := testenv.Current(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	namespaces(t, cs, "it-static-argocd", "it-static-system")
	_, err := cs.CoreV1().Secrets("it-static-argocd").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "aicr-registry"},
		StringData: map[string]string{"type": "oci", "url": "oci://registry.example.com/aicr", "username": "robot", "password": "static-pw-value"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	if _, err := dispatch.EnsureSetup(t.Context(), js, 1); err != nil { // the planner's part
		t.Fatal(err)
	}
	b := start(t, env, "--nats-url", ns.URL, "--registry-auth", "static", "--registry-repository", "registry.example.com/aicr",
		"--engine-namespace", "it-static-argocd", "--namespace", "it-static-system")

	var published []string
	err = testenv.WaitFor(t.Context(), statusTimeout, "credentials status published", func(ctx context.Context) (bool, error) {
		published, err = credentialsStatuses(ctx, js)
		return len(published) > 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"mode":"static"`, `"ok":false`, `"reason":"RegistryCredentialsUnavailable"`,
		"label argocd.argoproj.io/secret-type is missing (want repo-creds)"} {
		if !strings.Contains(published[0], want) {
			t.Errorf("status %s lacks %s", published[0], want)
		}
	}
	code, log := b.stop(t)
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if strings.Contains(log+published[0], "static-pw-value") {
		t.Errorf("the password shows in the log or status")
	}
	s, err := cs.CoreV1().Secrets("it-static-argocd").Get(t.Context(), "aicr-registry", metav1.GetOptions{})
	if err != nil || len(s.Labels) != 0 || len(s.ManagedFields) != 1 {
		t.Errorf("static mode touched the Secret: labels %v, %d field managers (%v)", s.Labels, len(s.ManagedFields), err)
	}
}

func TestBinaryStaysNotReadyWithoutNATSButStillRefreshes(t *testing.T) {
	env := testenv.Current(t)
	ecrtest.Isolate(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	namespaces(t, cs, "it-nonats-argocd", "it-nonats-system")
	srv := ecrtest.New(t, func(int) ecrtest.Reply {
		return ecrtest.Reply{Token: ecrtest.Token("AWS", "pw"), ExpiresAt: time.Now().Add(12 * time.Hour)}
	})
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, env, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--registry-repository", "127.0.0.1:5000/aicr",
		"--aws-region", "us-west-2", "--ecr-endpoint", srv.URL, "--engine-namespace", "it-nonats-argocd", "--namespace", "it-nonats-system")

	err = testenv.WaitFor(t.Context(), readyTimeout, "/readyz answering", func(ctx context.Context) (bool, error) {
		code, _, err := get(ctx, b.healthURL+"/readyz")
		return code != 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// the Secret does not wait for NATS
	err = testenv.WaitFor(t.Context(), secretTimeout, "Secret written without NATS", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Secrets("it-nonats-argocd").Get(ctx, "aicr-registry", metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// ...and after that, still not ready
	code, body, err := get(t.Context(), b.healthURL+"/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "nats") {
		t.Errorf("/readyz = %d %q (%v), want 503 naming nats", code, body, err)
	}
	if exit, log := b.stop(t); exit != 0 {
		t.Errorf("exit code %d, want 0; log:\n%s", exit, log)
	}
}
