// Package ecr fetches registry credentials from Amazon ECR's GetAuthorizationToken with the AWS
// SDK's default credential chain (IRSA or EKS Pod Identity in a cluster). The token it returns
// hides its password from fmt, JSON and zerolog, and its errors never carry a server's message
// unredacted: an error is logged, published and counted, so it must be safe to print.
package ecr

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awsecr "github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
)

// Sentinel errors.
var (
	// ErrNoRegion: neither the flag, the environment, the shared config nor the registry host
	// names an AWS region.
	ErrNoRegion = errors.New("no AWS region: set --aws-region or AWS_REGION, or use an ECR registry host (<account>.dkr.ecr.<region>.amazonaws.com)")
	// ErrMalformedResponse: ECR answered 200 with something that is not a usable token.
	ErrMalformedResponse = errors.New("malformed GetAuthorizationToken response")
)

// Config says how to reach ECR.
type Config struct {
	// Region is the AWS region; when empty, the SDK's (AWS_REGION, AWS_DEFAULT_REGION, shared
	// config), else FallbackRegion.
	Region string
	// FallbackRegion is used when neither Region nor the SDK names one (the registry host's).
	FallbackRegion string
	// Endpoint overrides the ECR endpoint (tests, VPC endpoints); empty for the SDK's.
	Endpoint string
	// Credentials overrides the default credential chain (tests).
	Credentials aws.CredentialsProvider
	// Redactor learns every token fetched and hides secrets from errors; nil for a private one.
	Redactor *redact.Redactor
}

// Client fetches authorization tokens.
type Client struct {
	api      *awsecr.Client
	region   string
	redactor *redact.Redactor
}

// New loads the AWS configuration (default credential chain) and returns a Client. It does not
// call AWS: credentials are resolved on the first request.
func New(ctx context.Context, c Config) (*Client, error) {
	opts := []func(*config.LoadOptions) error{
		// The refresher owns retries: with its injected clock, capped backoff and a reported
		// status per attempt. SDK retries would add unseen, real-time sleeps underneath.
		config.WithRetryMaxAttempts(1),
	}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(c.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = c.FallbackRegion
	}
	if cfg.Region == "" {
		return nil, ErrNoRegion
	}
	api := awsecr.NewFromConfig(cfg, func(o *awsecr.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	r := c.Redactor
	if r == nil {
		r = &redact.Redactor{}
	}
	return &Client{api: api, region: cfg.Region, redactor: r}, nil
}

// Region is the region requests are signed for.
func (c *Client) Region() string { return c.region }

// Token calls GetAuthorizationToken and decodes the first authorization data. The returned
// error is safe to log and publish.
func (c *Client) Token(ctx context.Context) (Token, error) {
	out, err := c.api.GetAuthorizationToken(ctx, &awsecr.GetAuthorizationTokenInput{})
	if err != nil {
		if ctx.Err() != nil {
			return Token{}, fmt.Errorf("get ecr authorization token: %w", ctx.Err())
		}
		return Token{}, c.apiError(err)
	}
	if len(out.AuthorizationData) == 0 {
		return Token{}, fmt.Errorf("get ecr authorization token: %w: no authorizationData", ErrMalformedResponse)
	}
	d := out.AuthorizationData[0]
	if d.AuthorizationToken == nil || *d.AuthorizationToken == "" {
		return Token{}, fmt.Errorf("get ecr authorization token: %w: empty authorizationToken", ErrMalformedResponse)
	}
	// Remember the raw token before anything can fail, so even a decoding error is redacted.
	c.redactor.Add(*d.AuthorizationToken)
	raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
	if err != nil {
		// never wrap err: base64's CorruptInputError is harmless, but keep the rule simple
		return Token{}, fmt.Errorf("get ecr authorization token: %w: authorizationToken is not base64", ErrMalformedResponse)
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" || password == "" {
		return Token{}, fmt.Errorf("get ecr authorization token: %w: authorizationToken is not user:password", ErrMalformedResponse)
	}
	c.redactor.Add(password)
	if d.ExpiresAt == nil || d.ExpiresAt.IsZero() {
		return Token{}, fmt.Errorf("get ecr authorization token: %w: no expiresAt", ErrMalformedResponse)
	}
	t := Token{Username: user, password: password, ExpiresAt: d.ExpiresAt.UTC()}
	if d.ProxyEndpoint != nil {
		t.ProxyEndpoint = *d.ProxyEndpoint
	}
	return t, nil
}

// apiError turns an SDK error into an *Error whose text is redacted. It deliberately does not
// wrap the SDK error: its Error() and its chain may hold the server's raw message.
func (c *Client) apiError(err error) *Error {
	e := &Error{Message: c.redactor.Error(err)}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.StatusCode = re.HTTPStatusCode()
	}
	return e
}

// Error is a failed GetAuthorizationToken call. Every field is safe to print.
type Error struct {
	// Code is the AWS error code (AccessDeniedException, ...), empty when there was no answer.
	Code string
	// StatusCode is the HTTP status, 0 when there was no answer.
	StatusCode int
	// Message is the SDK's description with every secret redacted.
	Message string
}

func (e *Error) Error() string { return "get ecr authorization token: " + e.Message }

// Token is a registry user name and password with its expiry. The password is hidden from fmt,
// encoding/json and zerolog; read it with Password.
type Token struct {
	// Username is the registry user (AWS).
	Username string
	// ExpiresAt is when the password stops working (ECR: 12 hours after issue).
	ExpiresAt time.Time
	// ProxyEndpoint is the registry URL ECR says the token is for.
	ProxyEndpoint string

	password string
}

// Password returns the registry password. Write it to the Secret and nowhere else.
func (t Token) Password() string { return t.password }

// String implements fmt.Stringer without the password.
func (t Token) String() string {
	return fmt.Sprintf("ecr.Token{Username:%s Password:%s ExpiresAt:%s}", t.Username, redact.Mask, t.ExpiresAt.Format(time.RFC3339))
}

// GoString implements fmt.GoStringer without the password.
func (t Token) GoString() string { return t.String() }

// MarshalJSON omits the password.
func (t Token) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"username":%q,"expires_at":%q}`, t.Username, t.ExpiresAt.Format(time.RFC3339)), nil
}

// MarshalZerologObject omits the password.
func (t Token) MarshalZerologObject(e *zerolog.Event) {
	e.Str("username", t.Username).Time("expires_at", t.ExpiresAt)
}

// ecrHost matches a private ECR registry host and captures its region.
var ecrHost = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// RegionFromRegistry returns the region of a private ECR registry repository
// ("<account>.dkr.ecr.<region>.amazonaws.com/path", with or without oci://), or "".
func RegionFromRegistry(repository string) string {
	host := strings.TrimPrefix(repository, "oci://")
	host, _, _ = strings.Cut(host, "/")
	host, _, _ = strings.Cut(host, ":")
	if m := ecrHost.FindStringSubmatch(host); m != nil {
		return m[1]
	}
	return ""
}
