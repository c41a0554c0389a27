package refresher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// DefaultCheckInterval is how often mode static checks the Secret.
const DefaultCheckInterval = time.Minute

// SecretChecker reports what Argo CD would miss in the Secret (*secret.Store).
type SecretChecker interface {
	Check(ctx context.Context, wantURL string) (secret.Report, error)
}

// Static checks the admin's Secret at start and every Interval and reports what is missing. It
// never writes.
type Static struct {
	Checker  SecretChecker
	Reporter StatusReporter
	Clock    clock.Clock
	Metrics  *Metrics
	// Secret names the Secret, for messages.
	Secret secret.Ref
	// WantURL, when set, is the credential URL the Secret must cover (oci://<registry repository>).
	WantURL string
	// Interval is the check period.
	Interval time.Duration
}

// Run checks until ctx ends, then returns nil.
func (s *Static) Run(ctx context.Context) error {
	last := staticState{run: strconv.FormatInt(s.Clock.Now().UnixNano(), 36)}
	for {
		s.check(ctx, &last)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.Clock.After(s.Interval):
		}
	}
}

// staticState is what the loop remembers between checks.
type staticState struct {
	rv      string // last resourceVersion seen
	message string // last result, to log a change once at warn and repeats at debug
	// run names this loop (its start time) and changes counts its results that differed from
	// the one before: both go into the message ID (staticID).
	run     string
	changes int
}

func (s *Static) check(ctx context.Context, last *staticState) {
	log := logging.From(ctx).With().Str(logging.KeyResourceName, s.Secret.String()).Logger()
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	rep, err := s.Checker.Check(cctx, s.WantURL)
	if ctx.Err() != nil {
		return
	}
	now := s.Clock.Now()
	var st bus.CredentialsStatus
	var level zerolog.Level
	switch {
	case err != nil:
		// API errors hold the Secret's name and the server's reason, never its data
		st = bus.CredentialsStatus{Mode: ModeStatic, Reason: v1alpha1.ReasonRegistryCredentialsUnavailable,
			Message: truncate("check registry credentials: " + err.Error())}
		level = zerolog.WarnLevel
	case !rep.OK():
		st = bus.CredentialsStatus{Mode: ModeStatic, Reason: v1alpha1.ReasonRegistryCredentialsUnavailable,
			Message: truncate("Secret " + s.Secret.String() + " is not usable by Argo CD: " + strings.Join(rep.Problems, "; "))}
		level = zerolog.WarnLevel
	case rep.Anonymous:
		st = bus.CredentialsStatus{Mode: ModeStatic, OK: true, Message: "Secret " + s.Secret.String() + " has the repo-creds label, type oci and url, and no username or password: Argo CD pulls anonymously"}
		level = zerolog.DebugLevel
	default:
		st = bus.CredentialsStatus{Mode: ModeStatic, OK: true, Message: "Secret " + s.Secret.String() + " has the repo-creds label, type oci, url, username and password"}
		level = zerolog.DebugLevel
	}
	if rep.ResourceVersion != "" {
		last.rv = rep.ResourceVersion
	}
	if st.Message == last.message {
		level = zerolog.DebugLevel
	} else {
		last.changes++
	}
	last.message = st.Message
	if st.OK {
		s.Metrics.LastSuccess.Set(float64(now.Unix()))
		s.Metrics.OK.Set(1)
	} else {
		s.Metrics.Failures.WithLabelValues(st.Reason).Inc()
		s.Metrics.OK.Set(0)
	}
	log.WithLevel(level).Bool("ok", st.OK).Str(logging.KeyReason, st.Reason).Str("result", st.Message).Msg("checked registry credentials")
	s.Reporter.Report(staticID(st, rep.ResourceVersion, last), st)
}

// staticID derives the message ID from what the status says, which version of the Secret it
// is about (the last one seen when it is gone), and which change of which run of the loop it is,
// so an unchanged result is not republished and a change always is: a result that comes back
// (OK, then a transient API error, then OK again; or OK again from the next leader after the
// last one reported an error) is a new message, not a duplicate that JetStream would drop for
// bus.DuplicateWindow while the planner holds the error.
func staticID(st bus.CredentialsStatus, rv string, last *staticState) string {
	h := sha256.New()
	for _, s := range []string{st.Reason, st.Message, rv, last.rv, last.run, strconv.Itoa(last.changes)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return ModeStatic + "/" + hex.EncodeToString(h.Sum(nil))[:16]
}
