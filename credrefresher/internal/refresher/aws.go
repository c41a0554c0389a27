package refresher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Modes, as --registry-auth spells them and CredentialsStatus.Mode reports them.
const (
	ModeAWS    = "aws"
	ModeStatic = "static"
)

// Defaults.
const (
	// DefaultRefreshInterval is how often a fresh ECR token is written (tokens last 12 hours).
	DefaultRefreshInterval = 6 * time.Hour
	// DefaultBackoffMin and DefaultBackoffMax bound the wait between failed attempts.
	DefaultBackoffMin = 5 * time.Second
	DefaultBackoffMax = 5 * time.Minute
	// attemptTimeout bounds one fetch-and-write.
	attemptTimeout = time.Minute
	// maxMessage keeps a status message inside the CRD's 1024-character limit.
	maxMessage = 900
)

// TokenSource fetches a registry token (*ecr.Client). Its errors must be safe to print.
type TokenSource interface {
	Token(ctx context.Context) (ecr.Token, error)
}

// SecretWriter writes the credentials into the repo-creds Secret (*secret.Store).
type SecretWriter interface {
	Write(ctx context.Context, c secret.Creds) (secret.Result, error)
}

// StatusReporter takes each result (*Reporter).
type StatusReporter interface {
	Report(id string, st bus.CredentialsStatus)
}

// AWS refreshes the ECR token in the Secret at start and every Interval, retrying failures with
// capped backoff, and reports every result.
type AWS struct {
	Source   TokenSource
	Writer   SecretWriter
	Reporter StatusReporter
	Clock    clock.Clock
	Metrics  *Metrics
	// Redactor hides the tokens from every logged or reported error.
	Redactor *redact.Redactor
	// Secret names the Secret, for messages.
	Secret secret.Ref
	// URL is the credential URL written (oci://<registry repository>).
	URL string
	// InsecureOCIForceHTTP writes insecureOCIForceHttp: "true".
	InsecureOCIForceHTTP bool
	// Interval is the refresh period; each wait is lowered by up to 10% (jitter) and never
	// longer than half the token's remaining life.
	Interval time.Duration
	// BackoffMin and BackoffMax bound the wait after a failure.
	BackoffMin, BackoffMax time.Duration
	// Rand returns a number in [0,1) for jitter; nil means no jitter.
	Rand func() float64
	// LastExpiry is the expiry of the token already in the Secret (from a previous run), so that
	// failures after a restart are reported Stale once it passed.
	LastExpiry time.Time
}

// awsState is what the loop remembers between attempts.
type awsState struct {
	expiresAt   time.Time // of the token in the Secret
	refreshedAt time.Time // when this process last wrote it
	failures    int       // consecutive
	streakStart time.Time // first failure of the current streak
}

// Run refreshes until ctx ends, then returns nil.
func (a *AWS) Run(ctx context.Context) error {
	st := awsState{expiresAt: a.LastExpiry}
	for {
		wait := a.attempt(ctx, &st)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.Clock.After(wait):
		}
	}
}

// attempt fetches a token and writes it, reports the result, and returns the wait before the
// next attempt.
func (a *AWS) attempt(ctx context.Context, st *awsState) time.Duration {
	log := logging.From(ctx).With().Str(logging.KeyResourceName, a.Secret.String()).Str(logging.KeyRegistry, a.URL).Logger()
	now := a.Clock.Now()
	tok, res, err := a.refresh(ctx, now)
	if ctx.Err() != nil {
		return 0
	}
	if err == nil {
		st.expiresAt, st.refreshedAt = tok.ExpiresAt, now
		st.failures = 0
		wait := jitter(a.Interval, 0.1, a.Rand)
		if half := tok.ExpiresAt.Sub(now) / 2; half < wait {
			wait = max(half, a.backoffMin())
		}
		a.Metrics.LastSuccess.Set(float64(now.Unix()))
		a.Metrics.Expiry.Set(float64(tok.ExpiresAt.Unix()))
		a.Metrics.OK.Set(1)
		log.Info().Str("result", string(res)).Time(logging.KeyExpiresAt, tok.ExpiresAt).
			Time("next_refresh", now.Add(wait)).Msg("refreshed registry credentials")
		refreshed, expires := now.UTC(), tok.ExpiresAt.UTC()
		a.Reporter.Report(ModeAWS+"/refreshed/"+strconv.FormatInt(tok.ExpiresAt.Unix(), 10), bus.CredentialsStatus{
			Mode: ModeAWS, OK: true, RefreshedAt: &refreshed, ExpiresAt: &expires,
			Message: fmt.Sprintf("token written to Secret %s, expires at %s", a.Secret, expires.Format(time.RFC3339)),
		})
		return wait
	}

	st.failures++
	if st.failures == 1 {
		st.streakStart = now
	}
	reason := v1alpha1.ReasonRegistryCredentialsUnavailable
	stale := !st.expiresAt.IsZero() && !now.Before(st.expiresAt)
	if stale {
		reason = v1alpha1.ReasonRegistryCredentialsStale
	}
	wait := backoff(st.failures, a.backoffMin(), a.backoffMax(), a.Rand)
	if !stale && !st.expiresAt.IsZero() {
		// wake when the token expires, so Stale is reported on time
		wait = min(wait, st.expiresAt.Sub(now))
	}
	errText := a.Redactor.Error(err)
	a.Metrics.Failures.WithLabelValues(reason).Inc()
	a.Metrics.OK.Set(0)
	ev := log.Warn()
	if stale {
		ev = log.Error()
	}
	ev = ev.Str(zerolog.ErrorFieldName, errText).Str(logging.KeyReason, reason).Int("attempt", st.failures).Dur("retry_in", wait)
	if !st.expiresAt.IsZero() {
		ev = ev.Time(logging.KeyExpiresAt, st.expiresAt)
	}
	ev.Msg("refresh registry credentials failed")

	status := bus.CredentialsStatus{Mode: ModeAWS, Reason: reason, Message: truncate(a.failureMessage(errText, st, stale, wait))}
	if !st.expiresAt.IsZero() {
		e := st.expiresAt.UTC()
		status.ExpiresAt = &e
	}
	if !st.refreshedAt.IsZero() {
		r := st.refreshedAt.UTC()
		status.RefreshedAt = &r
	}
	// one message per attempt of a failure streak: a republish of the same attempt is the same
	// message, a new attempt is news
	a.Reporter.Report(fmt.Sprintf("%s/failed/%d/%d", ModeAWS, st.streakStart.UnixNano(), st.failures), status)
	return wait
}

func (a *AWS) failureMessage(errText string, st *awsState, stale bool, wait time.Duration) string {
	var state string
	switch {
	case stale:
		state = fmt.Sprintf("the token in Secret %s expired at %s", a.Secret, st.expiresAt.UTC().Format(time.RFC3339))
	case !st.expiresAt.IsZero():
		state = fmt.Sprintf("the token in Secret %s is valid until %s", a.Secret, st.expiresAt.UTC().Format(time.RFC3339))
	default:
		state = fmt.Sprintf("no token has been written to Secret %s", a.Secret)
	}
	return fmt.Sprintf("%s; %s; attempt %d, retrying in %s", errText, state, st.failures, wait)
}

// refresh fetches a token and writes it.
func (a *AWS) refresh(ctx context.Context, now time.Time) (ecr.Token, secret.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	tok, err := a.Source.Token(ctx)
	if err != nil {
		return ecr.Token{}, "", err
	}
	if !tok.ExpiresAt.After(now) {
		return ecr.Token{}, "", fmt.Errorf("get ecr authorization token: %w: it expired at %s", errExpiredToken, tok.ExpiresAt.Format(time.RFC3339))
	}
	res, err := a.Writer.Write(ctx, secret.Creds{
		URL: a.URL, Username: tok.Username, Password: tok.Password(),
		InsecureOCIForceHTTP: a.InsecureOCIForceHTTP, RefreshedAt: now, ExpiresAt: tok.ExpiresAt,
	})
	if err != nil {
		return ecr.Token{}, "", err
	}
	return tok, res, nil
}

var errExpiredToken = errors.New("ECR returned an expired token (is the clock right?)")

func (a *AWS) backoffMin() time.Duration {
	if a.BackoffMin > 0 {
		return a.BackoffMin
	}
	return DefaultBackoffMin
}

func (a *AWS) backoffMax() time.Duration {
	if a.BackoffMax > 0 {
		return a.BackoffMax
	}
	return DefaultBackoffMax
}

// jitter lowers d by up to frac·d, so a jittered wait never exceeds d.
func jitter(d time.Duration, frac float64, rnd func() float64) time.Duration {
	if rnd == nil {
		return d
	}
	return d - time.Duration(float64(d)*frac*rnd())
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage] + "..."
}
