// Package ecrtest is a local HTTP server speaking ECR's JSON 1.1 protocol for
// GetAuthorizationToken, which checks that each request is SigV4-signed for service ecr, and
// helpers that keep a developer's or CI's AWS configuration out of a test.
package ecrtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Target is the X-Amz-Target of GetAuthorizationToken.
const Target = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"

// Test credentials Isolate puts in the environment.
const (
	AccessKeyID     = "AKIDTESTCREDREFRESH"
	SecretAccessKey = "test-secret-access-key"
)

// Request is what the server saw of one call.
type Request struct {
	// Region, Service and AccessKeyID come from the Authorization header's credential scope.
	Region, Service, AccessKeyID string
	// Problems lists what was wrong with the request (target, content type, signature); the
	// server answered 400 when there were any.
	Problems []string
}

// Reply is the answer to the n-th call.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Token is the authorizationToken to return (use Token to build one) with ExpiresAt.
	Token     string
	ExpiresAt time.Time
	// Code and Message make an error body ({"__type": Code, "message": Message}).
	Code, Message string
	// Body, when set, is sent as is.
	Body string
}

// Server is a fake ECR endpoint.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	reply    func(n int) Reply
}

// New starts a server answering call n (from 1) with reply(n); it stops when the test ends.
func New(t testing.TB, reply func(n int) Reply) *Server {
	t.Helper()
	s := &Server{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the calls seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Calls returns how many calls the server saw.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	req := Request{}
	if r.Method != http.MethodPost {
		req.Problems = append(req.Problems, "method "+r.Method)
	}
	if got := r.Header.Get("X-Amz-Target"); got != Target {
		req.Problems = append(req.Problems, fmt.Sprintf("X-Amz-Target %q", got))
	}
	if got := r.Header.Get("Content-Type"); got != "application/x-amz-json-1.1" {
		req.Problems = append(req.Problems, fmt.Sprintf("Content-Type %q", got))
	}
	if r.Header.Get("X-Amz-Date") == "" {
		req.Problems = append(req.Problems, "no X-Amz-Date")
	}
	if err := parseAuthorization(r.Header.Get("Authorization"), &req); err != nil {
		req.Problems = append(req.Problems, err.Error())
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("00000000-0000-0000-0000-%012d", n))
	if len(req.Problems) > 0 {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "InvalidSignatureException", "message": strings.Join(req.Problems, "; ")})
		return
	}
	rep := s.reply(n)
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	switch {
	case rep.Body != "":
		_, _ = io.WriteString(w, rep.Body)
	case status != http.StatusOK:
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": rep.Code, "message": rep.Message})
	default:
		// expiresAt is epoch seconds as a JSON number, as ECR sends it
		fmt.Fprintf(w, `{"authorizationData":[{"authorizationToken":%q,"expiresAt":%d.0,"proxyEndpoint":"https://123456789012.dkr.ecr.us-west-2.amazonaws.com"}]}`,
			rep.Token, rep.ExpiresAt.Unix())
	}
}

// parseAuthorization reads "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request,
// SignedHeaders=..., Signature=...".
func parseAuthorization(h string, req *Request) error {
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != "AWS4-HMAC-SHA256" {
		return fmt.Errorf("authorization is not SigV4: %q", alg)
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q", fields["Credential"])
	}
	req.AccessKeyID, req.Region, req.Service = scope[0], scope[2], scope[3]
	if !strings.Contains(fields["SignedHeaders"], "x-amz-target") || !strings.Contains(fields["SignedHeaders"], "host") {
		return fmt.Errorf("signed headers %q lack host or x-amz-target", fields["SignedHeaders"])
	}
	if len(fields["Signature"]) != 64 {
		return fmt.Errorf("signature %q is not 64 hex characters", fields["Signature"])
	}
	return nil
}

// Token encodes user:password as ECR's authorizationToken.
func Token(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// Password returns a password shaped like ECR's (a long base64 blob), distinct per seed.
func Password(seed string) string {
	raw := strings.Repeat(fmt.Sprintf(`{"payload":"secret-%s","datakey":"k-%s"}`, seed, seed), 20)
	return base64.StdEncoding.EncodeToString([]byte(raw))
}

// Isolate keeps the machine's AWS configuration out of the test: no instance metadata, no
// config or credentials files, static test credentials in the environment (the default chain
// then finds them first). It uses t.Setenv, so the test must not be parallel.
func Isolate(t testing.TB) {
	t.Helper()
	missing := filepath.Join(t.TempDir(), "nonexistent")
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_CONFIG_FILE":                        missing,
		"AWS_SHARED_CREDENTIALS_FILE":            missing,
		"AWS_ACCESS_KEY_ID":                      AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":                  SecretAccessKey,
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_ROLE_ARN":                           "",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "",
	} {
		t.Setenv(k, v)
	}
}
