package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Registry credentials in aws mode (Options.AWSAuth): the registry's user is AWS, as on ECR, and
// a local endpoint speaking ECR's GetAuthorizationToken hands its password out as the token.
const (
	// ECRUsername is the registry user of an ECR token.
	ECRUsername = "AWS"
	// ECRAccessKeyID and ECRSecretAccessKey are the static AWS credentials credrefresher runs
	// with; the fake endpoint accepts only requests signed with this key.
	ECRAccessKeyID     = "AKIDAICRE2ECREDS"
	ECRSecretAccessKey = "aicr-e2e-secret-access-key"
	// ECRRegion is the region credrefresher signs for (--aws-region).
	ECRRegion = "us-east-1"
	// ecrTarget is the X-Amz-Target of GetAuthorizationToken (JSON 1.1 protocol).
	ecrTarget = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"

	defaultECRRefresh  = 20 * time.Second
	defaultECRLifetime = time.Hour
)

// AWSAuth runs credrefresher with --registry-auth=aws against a fake ECR endpoint (Stack.ECR)
// instead of the static repo-creds Secret. The stack then creates what the Helm chart creates
// in aws mode: the repo-creds Secret with type, url and username AWS but no password, which
// credrefresher fills in; and the per-chart repository Secrets carry no credentials (only type,
// url, insecureOCIForceHttp), so Argo CD inherits them from the repo-creds Secret (Argo CD
// v3.4.2 util/db enrichCredsToRepo: a repository without username, password, token or key gets
// the credentials of the longest repo-creds URL prefix).
type AWSAuth struct {
	// RefreshInterval is credrefresher's --refresh-interval (20s when zero).
	RefreshInterval time.Duration
	// TokenLifetime is how long the endpoint's tokens last at first (1h when zero). The planner
	// starts no step whose action timeout (15m by default) outlives the token, so keep it above
	// that while rolling out; ECR.SetLifetime shortens it later.
	TokenLifetime time.Duration

	ecr *FakeECR
}

// ECR is the fake ECR endpoint of a stack started with Options.AWSAuth (nil otherwise).
func (s *Stack) ECR() *FakeECR {
	if s.opts.AWSAuth == nil {
		return nil
	}
	return s.opts.AWSAuth.ecr
}

// registryAuth is the registry's user: AWS with a fresh password in aws mode; none for an
// anonymous registry.
func (o Options) registryAuth() *testenv.BasicAuth {
	if o.AnonymousRegistry {
		return nil
	}
	user := "aicr"
	if o.AWSAuth != nil {
		user = ECRUsername
	}
	return &testenv.BasicAuth{Username: user, Password: natstest.RandomPassword()}
}

// prepareCredentials switches the cluster and credrefresher's flags to aws mode (nothing in
// static mode). It runs after prepareCluster and before the binaries start.
func (s *Stack) prepareCredentials(ctx context.Context) error {
	a := s.opts.AWSAuth
	if a == nil {
		return nil
	}
	refresh, lifetime := a.RefreshInterval, a.TokenLifetime
	if refresh <= 0 {
		refresh = defaultECRRefresh
	}
	if lifetime <= 0 {
		lifetime = defaultECRLifetime
	}
	a.ecr = newFakeECR(s.Env.Registry.Auth.Password, lifetime)

	// The chart's repo-creds Secret in aws mode: no password until credrefresher writes one.
	secrets := s.Kube.CoreV1().Secrets(EngineNamespace)
	if err := secrets.Delete(ctx, RepoCredsSecret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete static repo-creds secret: %w", err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RepoCredsSecret, Namespace: EngineNamespace,
			Labels: map[string]string{v1alpha1.LabelArgoSecretType: v1alpha1.ArgoSecretTypeRepoCreds}},
		StringData: map[string]string{"type": "oci", "url": "oci://" + s.Repository, "username": ECRUsername},
	}
	if _, err := secrets.Create(ctx, creds, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create repo-creds secret: %w", err)
	}
	// Per-chart repository Secrets without credentials: Argo CD must use the repo-creds ones.
	for _, c := range ExampleComponents() {
		name := "aicr-repo-" + c.Name
		sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get repository secret %s: %w", name, err)
		}
		delete(sec.Data, "username")
		delete(sec.Data, "password")
		if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update repository secret %s: %w", name, err)
		}
	}

	// Later flags win: these override the static mode of Flags.
	extra := map[string][]string{}
	for k, v := range s.opts.ExtraFlags {
		extra[k] = v
	}
	extra[v1alpha1.BinaryCredRefresher] = append([]string{
		"--registry-auth=aws", "--ecr-endpoint=" + a.ecr.URL(), "--aws-region=" + ECRRegion,
		"--insecure-oci-force-http", "--refresh-interval=" + refresh.String(),
	}, s.opts.ExtraFlags[v1alpha1.BinaryCredRefresher]...)
	s.opts.ExtraFlags = extra
	fmt.Fprintf(s.log, "stack: registry credentials mode aws (fake ECR %s, refresh %s, token lifetime %s)\n", a.ecr.URL(), refresh, lifetime)
	return nil
}

// binaryEnv is a binary's environment: the test's (nil), except credrefresher in aws mode, which
// gets static AWS test credentials and no access to the machine's AWS configuration.
func (s *Stack) binaryEnv(binary string) []string {
	if s.opts.AWSAuth == nil || binary != v1alpha1.BinaryCredRefresher {
		return nil
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	missing := filepath.Join(s.Dir, "aws-nonexistent")
	return append(env,
		"AWS_ACCESS_KEY_ID="+ECRAccessKeyID, "AWS_SECRET_ACCESS_KEY="+ECRSecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+missing, "AWS_SHARED_CREDENTIALS_FILE="+missing)
}

// stopCredentials stops the fake ECR endpoint.
func (s *Stack) stopCredentials() {
	if e := s.ECR(); e != nil {
		e.srv.Close()
	}
}

// RotateRegistryPassword makes the registry accept password (for user AWS in aws mode) and
// nothing else: it rewrites the htpasswd file, which the registry (distribution v3) reads again
// when its modification time changes, and waits until the registry rejects the old password and
// accepts the new one. PushChart uses the new password from then on.
func (s *Stack) RotateRegistryPassword(ctx context.Context, password string) error {
	auth := s.Env.Registry.Auth
	if auth == nil {
		return fmt.Errorf("rotate registry password: the registry has no authentication")
	}
	path, err := s.htpasswdPath()
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("hash registry password: %w", err)
	}
	// write and rename, so the registry never reads half a file
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(auth.Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write htpasswd: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace htpasswd: %w", err)
	}
	old := auth.Password
	err = testenv.WaitFor(ctx, time.Minute, "the registry to take the new password", func(ctx context.Context) (bool, error) {
		oldOK, err := s.RegistryAccepts(ctx, auth.Username, old)
		if err != nil {
			return false, err
		}
		newOK, err := s.RegistryAccepts(ctx, auth.Username, password)
		return !oldOK && newOK, err
	})
	if err != nil {
		return err
	}
	auth.Password = password
	return nil
}

// RegistryAccepts reports whether the registry answers GET /v2/ with 200 for these credentials
// (an empty user sends none).
func (s *Stack) RegistryAccepts(ctx context.Context, user, password string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Env.Registry.Host+"/v2/", nil)
	if err != nil {
		return false, fmt.Errorf("build registry request: %w", err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("ask the registry: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusUnauthorized:
		return false, nil
	}
	return false, fmt.Errorf("ask the registry: GET /v2/ answered %s", resp.Status)
}

// htpasswdPath reads the registry's configuration for its htpasswd file.
func (s *Stack) htpasswdPath() (string, error) {
	raw, err := os.ReadFile(filepath.Join(s.Dir, testenv.ProcRegistry, "config.yml"))
	if err != nil {
		return "", fmt.Errorf("read registry config: %w", err)
	}
	var cfg struct {
		Auth struct {
			Htpasswd struct {
				Path string `json:"path"`
			} `json:"htpasswd"`
		} `json:"auth"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("decode registry config: %w", err)
	}
	if cfg.Auth.Htpasswd.Path == "" {
		return "", fmt.Errorf("registry config has no auth.htpasswd.path")
	}
	return cfg.Auth.Htpasswd.Path, nil
}

// RandomPassword returns a fresh registry password (48 hex characters: bcrypt takes at most 72
// bytes, so ECR's real kilobyte-long passwords cannot be planted in an htpasswd registry).
func RandomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// ECRToken is the authorizationToken ECR returns for a password: base64("AWS:" + password).
func ECRToken(password string) string {
	return base64.StdEncoding.EncodeToString([]byte(ECRUsername + ":" + password))
}

// FakeECR is a local endpoint speaking ECR's JSON 1.1 protocol for GetAuthorizationToken. It
// answers requests signed (SigV4) with ECRAccessKeyID for service ecr; it hands out the
// registry's password as the token, valid for the configured lifetime, or fails with HTTP 500.
type FakeECR struct {
	srv *httptest.Server

	mu       sync.Mutex
	password string
	lifetime time.Duration
	failing  bool
	calls    int
	rejected []string
}

func newFakeECR(password string, lifetime time.Duration) *FakeECR {
	f := &FakeECR{password: password, lifetime: lifetime}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the endpoint's URL (credrefresher's --ecr-endpoint).
func (f *FakeECR) URL() string { return f.srv.URL }

// SetPassword makes the endpoint hand out password from the next call on.
func (f *FakeECR) SetPassword(password string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.password = password
}

// SetLifetime sets how long the tokens handed out from the next call on last.
func (f *FakeECR) SetLifetime(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lifetime = d
}

// SetFailing makes every call answer HTTP 500 (ServerException) while on.
func (f *FakeECR) SetFailing(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = on
}

// Calls is how many requests the endpoint saw.
func (f *FakeECR) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Rejected lists what was wrong with the requests the endpoint refused (not signed for ecr with
// the test key, wrong target or content type); empty when every request was well formed.
func (f *FakeECR) Rejected() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rejected...)
}

func (f *FakeECR) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	problem := requestProblem(r)
	f.mu.Lock()
	f.calls++
	password, lifetime, failing := f.password, f.lifetime, f.failing
	if problem != "" {
		f.rejected = append(f.rejected, problem)
	}
	f.mu.Unlock()
	expires := time.Now().Add(lifetime).Truncate(time.Second)

	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("00000000-0000-0000-0000-%012d", time.Now().UnixNano()%1e12))
	switch {
	case problem != "":
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "InvalidSignatureException", "message": problem})
	case failing:
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "ServerException", "message": "the fake ECR endpoint is failing on purpose"})
	default:
		// expiresAt is epoch seconds as a JSON number, as ECR sends it
		fmt.Fprintf(w, `{"authorizationData":[{"authorizationToken":%q,"expiresAt":%d.0,"proxyEndpoint":"https://123456789012.dkr.ecr.%s.amazonaws.com"}]}`,
			ECRToken(password), expires.Unix(), ECRRegion)
	}
}

// requestProblem says what is wrong with a GetAuthorizationToken request, "" when nothing.
func requestProblem(r *http.Request) string {
	var p []string
	if r.Method != http.MethodPost {
		p = append(p, "method "+r.Method)
	}
	if got := r.Header.Get("X-Amz-Target"); got != ecrTarget {
		p = append(p, fmt.Sprintf("X-Amz-Target %q", got))
	}
	if got := r.Header.Get("Content-Type"); got != "application/x-amz-json-1.1" {
		p = append(p, fmt.Sprintf("Content-Type %q", got))
	}
	// AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/ecr/aws4_request, SignedHeaders=..., Signature=...
	auth := r.Header.Get("Authorization")
	scope := "/" + ECRRegion + "/ecr/aws4_request"
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+ECRAccessKeyID+"/") || !strings.Contains(auth, scope) || !strings.Contains(auth, "Signature=") {
		p = append(p, fmt.Sprintf("Authorization is not SigV4 with key %s and scope %s", ECRAccessKeyID, scope))
	}
	return strings.Join(p, "; ")
}
