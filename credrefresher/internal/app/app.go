// Package app is the credential refresher's wiring: its options and Run.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Name is the binary's name: logger component, metrics namespace, NATS connection name and
// leader-election lock.
const Name = v1alpha1.BinaryCredRefresher

// Defaults.
const (
	// maxRefreshInterval: ECR tokens last 12 hours; a longer period lets them lapse.
	maxRefreshInterval = 12 * time.Hour
)

// Options are the credential refresher's flags.
type Options struct {
	service.Options
	// RegistryAuth is --registry-auth: aws or static.
	RegistryAuth string
	// RegistryRepository is --registry-repository: host/path (or oci://host/path) under which
	// the charts live; the Secret's url.
	RegistryRepository string
	// RepoCredsSecret is --repo-creds-secret: the Secret's name.
	RepoCredsSecret string
	// AWSRegion is --aws-region; empty means the SDK's (AWS_REGION ...), else the registry host's.
	AWSRegion string
	// ECREndpoint is --ecr-endpoint: an ECR endpoint URL override (tests, VPC endpoints).
	ECREndpoint string
	// InsecureOCIForceHTTP is --insecure-oci-force-http: write insecureOCIForceHttp: "true".
	InsecureOCIForceHTTP bool
	// RefreshInterval is --refresh-interval (aws).
	RefreshInterval time.Duration
	// CheckInterval is --check-interval (static).
	CheckInterval time.Duration

	// clock is the refresh clock; the real one unless a test sets it.
	clock clock.Clock
	// logOut receives the log; stderr when nil.
	logOut *os.File
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
	fs.StringVar(&o.RegistryAuth, "registry-auth", refresher.ModeAWS, "how the registry credentials are kept: aws (write a fresh ECR token) or static (check the admin's Secret)")
	fs.StringVar(&o.RegistryRepository, "registry-repository", "", "registry repository the charts live under, host/path or oci://host/path (the Secret's url)")
	fs.StringVar(&o.RepoCredsSecret, "repo-creds-secret", v1alpha1.DefaultRepoCredsSecret, "name of the repo-creds Secret")
	fs.StringVar(&o.AWSRegion, "aws-region", "", "AWS region of ECR (default: AWS_REGION, AWS_DEFAULT_REGION, the shared config, else the region in an ECR registry host)")
	fs.StringVar(&o.ECREndpoint, "ecr-endpoint", "", "ECR endpoint URL override (tests, VPC endpoints)")
	fs.BoolVar(&o.InsecureOCIForceHTTP, "insecure-oci-force-http", false, "write insecureOCIForceHttp: \"true\" into the Secret (plain-HTTP registry of the local stack)")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", refresher.DefaultRefreshInterval, "how often a fresh ECR token is written (aws), jittered 10% earlier")
	fs.DurationVar(&o.CheckInterval, "check-interval", refresher.DefaultCheckInterval, "how often the admin's Secret is checked (static)")
}

// Validate checks the flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []string
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, strings.TrimPrefix(err.Error(), "invalid flags: "))
	}
	switch o.RegistryAuth {
	case refresher.ModeAWS:
		if o.RegistryRepository == "" {
			errs = append(errs, "--registry-repository is required with --registry-auth aws")
		}
		if o.RefreshInterval <= 0 || o.RefreshInterval >= maxRefreshInterval {
			errs = append(errs, fmt.Sprintf("--refresh-interval %s: use a duration above 0 and below 12h (ECR tokens last 12 hours)", o.RefreshInterval))
		}
		if o.ECREndpoint != "" && !strings.HasPrefix(o.ECREndpoint, "https://") && !strings.HasPrefix(o.ECREndpoint, "http://") {
			errs = append(errs, fmt.Sprintf("--ecr-endpoint %q: use an http:// or https:// URL", o.ECREndpoint))
		}
	case refresher.ModeStatic:
		if o.CheckInterval <= 0 {
			errs = append(errs, fmt.Sprintf("--check-interval %s: use a duration above 0", o.CheckInterval))
		}
	default:
		errs = append(errs, fmt.Sprintf("--registry-auth %q: use aws or static", o.RegistryAuth))
	}
	if o.RegistryRepository != "" {
		if err := validRepository(o.RegistryRepository); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if o.RepoCredsSecret == "" {
		errs = append(errs, "--repo-creds-secret is required")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
	}
	return nil
}

func validRepository(r string) error {
	rest := strings.TrimPrefix(r, "oci://")
	host, _, _ := strings.Cut(rest, "/")
	if strings.Contains(rest, "://") || host == "" || strings.ContainsAny(r, " \t\n") {
		return fmt.Errorf("--registry-repository %q: use host[:port]/path or oci://host[:port]/path", r)
	}
	return nil
}

// Main parses args, runs the binary and returns the exit code. The log goes to stderr when it
// is a file, else to the process's stderr.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	var o Options
	return service.Main(ctx, Name, args, stderr, &o, func(ctx context.Context) error {
		if f, ok := stderr.(*os.File); ok {
			o.logOut = f
		}
		return Run(ctx, o)
	})
}

// Run runs the credential refresher until ctx ends.
func Run(ctx context.Context, o Options) error {
	logOut := o.logOut
	if logOut == nil {
		logOut = os.Stderr
	}
	clk := o.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	base, err := service.Start(Name, o.Options, true, logOut)
	if err != nil {
		return err
	}
	defer base.Close()
	ctx = logging.Into(ctx, base.Log)

	ref := secret.Ref{Namespace: o.EngineNamespace, Name: o.RepoCredsSecret}
	store := &secret.Store{Secrets: base.KubeClient.CoreV1(), Ref: ref}
	metrics := refresher.NewMetrics(base.Metrics, Name)
	reporter := &refresher.Reporter{
		Publisher:   base.Publisher(),
		StreamReady: func(ctx context.Context) error { return dispatch.StreamExists(ctx, base.JS, bus.StreamEvents) },
		Clock:       clk,
		Metrics:     metrics,
	}
	var loop interface{ Run(context.Context) error }
	switch o.RegistryAuth {
	case refresher.ModeAWS:
		redactor := &redact.Redactor{}
		client, err := ecr.New(ctx, ecr.Config{
			Region:         o.AWSRegion,
			FallbackRegion: ecr.RegionFromRegistry(o.RegistryRepository),
			Endpoint:       o.ECREndpoint,
			Redactor:       redactor,
		})
		if err != nil {
			return err
		}
		base.Log.Info().Str("region", client.Region()).Str(logging.KeyResourceName, ref.String()).
			Str(logging.KeyRegistry, secret.URL(o.RegistryRepository)).Msg("registry credentials mode aws")
		loop = &awsLoop{AWS: refresher.AWS{
			Source: client, Writer: store, Reporter: reporter, Clock: clk, Metrics: metrics,
			Redactor: redactor, Secret: ref, URL: secret.URL(o.RegistryRepository),
			InsecureOCIForceHTTP: o.InsecureOCIForceHTTP, Interval: o.RefreshInterval, Rand: rand.Float64,
		}, store: store}
	case refresher.ModeStatic:
		want := ""
		if o.RegistryRepository != "" {
			want = secret.URL(o.RegistryRepository)
		}
		base.Log.Info().Str(logging.KeyResourceName, ref.String()).Msg("registry credentials mode static")
		loop = &refresher.Static{Checker: store, Reporter: reporter, Clock: clk, Metrics: metrics,
			Secret: ref, WantURL: want, Interval: o.CheckInterval}
	}

	g, gctx := errgroup.WithContext(ctx)
	if _, _, err := base.Serve(gctx, g); err != nil {
		return err
	}
	g.Go(func() error {
		return base.RunLeader(gctx, func(lctx context.Context) error {
			lg, lgctx := errgroup.WithContext(lctx)
			lg.Go(func() error { return reporter.Run(lgctx) })
			lg.Go(func() error { return loop.Run(lgctx) })
			return lg.Wait()
		})
	})
	base.Log.Info().Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}

// awsLoop reads the expiry of the token already in the Secret before the first refresh, so a
// replica that starts while ECR fails still reports Stale once that token lapses.
type awsLoop struct {
	refresher.AWS
	store *secret.Store
}

func (l *awsLoop) Run(ctx context.Context) error {
	if exp, err := l.store.LastExpiry(ctx); err != nil {
		logging.From(ctx).Warn().Err(err).Msg("read expiry of the token in the Secret")
	} else {
		l.LastExpiry = exp
	}
	return l.AWS.Run(ctx)
}
