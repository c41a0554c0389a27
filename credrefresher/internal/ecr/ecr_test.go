package ecr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr/ecrtest"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
)

func newClient(t *testing.T, srv *ecrtest.Server, r *redact.Redactor) *ecr.Client {
	t.Helper()
	c, err := ecr.New(context.Background(), ecr.Config{Region: "us-west-2", Endpoint: srv.URL, Redactor: r})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func TestTokenDecodesTheAuthorizationDataOfASignedRequest(t *testing.T) {
	ecrtest.Isolate(t)
	expires := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	password := ecrtest.Password("first")
	srv := ecrtest.New(t, func(int) ecrtest.Reply {
		return ecrtest.Reply{Token: ecrtest.Token("AWS", password), ExpiresAt: expires}
	})

	tok, err := newClient(t, srv, nil).Token(context.Background())
	if err != nil {
		t.Fatalf("Token: %v", err)
	}

	if tok.Username != "AWS" || tok.Password() != password || !tok.ExpiresAt.Equal(expires) {
		t.Errorf("token = %s with password match %t, want AWS, the password, expiring %s", tok, tok.Password() == password, expires)
	}
	want := []ecrtest.Request{{Region: "us-west-2", Service: "ecr", AccessKeyID: ecrtest.AccessKeyID}}
	if diff := cmp.Diff(want, srv.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestTokenFailures(t *testing.T) {
	ecrtest.Isolate(t)
	expires := time.Now().Add(12 * time.Hour)
	echoed := ecrtest.Password("echoed")
	tests := map[string]struct {
		reply      ecrtest.Reply
		wantIs     error
		wantCode   string
		wantStatus int
		wantText   string
	}{
		"access denied keeps the code, the status and the message": {
			reply:    ecrtest.Reply{Status: http.StatusBadRequest, Code: "AccessDeniedException", Message: "User: arn:aws:sts::123456789012:assumed-role/aicr/x is not authorized to perform: ecr:GetAuthorizationToken"},
			wantCode: "AccessDeniedException", wantStatus: http.StatusBadRequest,
			wantText: "not authorized to perform: ecr:GetAuthorizationToken",
		},
		"an error body echoing a token never shows it": {
			reply:    ecrtest.Reply{Status: http.StatusBadRequest, Code: "InvalidParameterException", Message: "bad token " + ecrtest.Token("AWS", echoed) + " and " + echoed},
			wantCode: "InvalidParameterException", wantStatus: http.StatusBadRequest,
			wantText: "bad token " + redact.Mask,
		},
		"a throttled call is a server error": {
			reply:    ecrtest.Reply{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailableException", Message: "try later"},
			wantCode: "ServiceUnavailableException", wantStatus: http.StatusServiceUnavailable, wantText: "try later",
		},
		"a token that is not base64": {
			reply:  ecrtest.Reply{Token: "%%%not-base64%%%", ExpiresAt: expires},
			wantIs: ecr.ErrMalformedResponse, wantText: "not base64",
		},
		"a token without a colon": {
			reply:  ecrtest.Reply{Token: ecrtest.Token("AWS", "")[:4], ExpiresAt: expires},
			wantIs: ecr.ErrMalformedResponse, wantText: "not user:password",
		},
		"no authorization data": {
			reply:  ecrtest.Reply{Body: `{"authorizationData":[]}`},
			wantIs: ecr.ErrMalformedResponse, wantText: "no authorizationData",
		},
		"no expiry": {
			reply:  ecrtest.Reply{Body: fmt.Sprintf(`{"authorizationData":[{"authorizationToken":%q}]}`, ecrtest.Token("AWS", echoed))},
			wantIs: ecr.ErrMalformedResponse, wantText: "no expiresAt",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := ecrtest.New(t, func(int) ecrtest.Reply { return tc.reply })
			_, err := newClient(t, srv, nil).Token(context.Background())
			if err == nil {
				t.Fatal("Token succeeded, want an error")
			}
			if strings.Contains(err.Error(), echoed) {
				t.Errorf("error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantText) || !strings.HasPrefix(err.Error(), "get ecr authorization token: ") {
				t.Errorf("error %q, want it to start with the verb and contain %q", err, tc.wantText)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
			if tc.wantCode != "" {
				var e *ecr.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %T is not *ecr.Error", err)
				}
				if e.Code != tc.wantCode || e.StatusCode != tc.wantStatus {
					t.Errorf("code %q status %d, want %q %d", e.Code, e.StatusCode, tc.wantCode, tc.wantStatus)
				}
			}
		})
	}
}

func TestTokenAfterASuccessRedactsThatTokenFromLaterErrors(t *testing.T) {
	ecrtest.Isolate(t)
	// a short password, below the token-shaped length: only the known-secret rule can hide it
	password := "short-pw-1"
	srv := ecrtest.New(t, func(n int) ecrtest.Reply {
		if n == 1 {
			return ecrtest.Reply{Token: ecrtest.Token("AWS", password), ExpiresAt: time.Now().Add(time.Hour)}
		}
		return ecrtest.Reply{Status: http.StatusBadRequest, Code: "InvalidParameterException", Message: "was " + password}
	})
	c := newClient(t, srv, nil)
	if _, err := c.Token(context.Background()); err != nil {
		t.Fatalf("first Token: %v", err)
	}
	_, err := c.Token(context.Background())
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "was "+redact.Mask) {
		t.Errorf("second Token error = %v, want the password replaced by %s", err, redact.Mask)
	}
}

func TestTokenUnreachableEndpoint(t *testing.T) {
	ecrtest.Isolate(t)
	srv := ecrtest.New(t, func(int) ecrtest.Reply { return ecrtest.Reply{} })
	c := newClient(t, srv, nil)
	srv.Close()
	_, err := c.Token(context.Background())
	var e *ecr.Error
	if !errors.As(err, &e) || e.StatusCode != 0 {
		t.Fatalf("error = %v, want an *ecr.Error without a status", err)
	}
}

func TestTokenNeverPrintsThePassword(t *testing.T) {
	password := ecrtest.Password("print")
	tok := ecr.NewTokenForTest("AWS", password, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Object("token", tok).Interface("as_json", tok).Msgf("%v %+v %#v %s", tok, tok, tok, tok)
	js, err := json.Marshal(tok)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := buf.String() + string(js) + fmt.Sprint(tok) + fmt.Sprintf("%#v", []ecr.Token{tok})
	if strings.Contains(out, password) {
		t.Errorf("printed token shows the password:\n%s", out)
	}
	if !strings.Contains(out, "AWS") {
		t.Errorf("printed token lost the username:\n%s", out)
	}
}

func TestNewRegion(t *testing.T) {
	tests := map[string]struct {
		cfg     ecr.Config
		env     string
		want    string
		wantErr error
	}{
		"the flag wins":                        {cfg: ecr.Config{Region: "eu-west-1", FallbackRegion: "us-east-1"}, env: "ap-south-1", want: "eu-west-1"},
		"the environment beats the host":       {cfg: ecr.Config{FallbackRegion: "us-east-1"}, env: "ap-south-1", want: "ap-south-1"},
		"the registry host is the last resort": {cfg: ecr.Config{FallbackRegion: "us-east-1"}, want: "us-east-1"},
		"no region anywhere is an error":       {wantErr: ecr.ErrNoRegion},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ecrtest.Isolate(t)
			t.Setenv("AWS_REGION", tc.env)
			c, err := ecr.New(context.Background(), tc.cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && c.Region() != tc.want {
				t.Errorf("region = %q, want %q", c.Region(), tc.want)
			}
		})
	}
}

func TestRegionFromRegistry(t *testing.T) {
	tests := map[string]struct {
		repository string
		want       string
	}{
		"a private ECR host":           {"123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr", "us-west-2"},
		"with the oci scheme":          {"oci://123456789012.dkr.ecr.eu-central-1.amazonaws.com/aicr", "eu-central-1"},
		"a FIPS endpoint":              {"123456789012.dkr.ecr-fips.us-east-1.amazonaws.com/x", "us-east-1"},
		"a China partition host":       {"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/x", "cn-north-1"},
		"another registry has none":    {"registry.example.com/aicr", ""},
		"a local registry with a port": {"127.0.0.1:5000/aicr", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ecr.RegionFromRegistry(tc.repository); got != tc.want {
				t.Errorf("RegionFromRegistry(%q) = %q, want %q", tc.repository, got, tc.want)
			}
		})
	}
}
