// Package app is the setup binary's wiring: its flags and Run.
package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	"github.com/aicr-run/aicr-operator/setup/secrets"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Name is the binary's name: logger component and user agent.
const Name = "setup"

// RouteUser is the NATS cluster's route user: its password is not hashed (routes send it).
const RouteUser = "route"

// DefaultValidity is how long a generated CA and certificate are valid: ten years.
const DefaultValidity = 3650 * 24 * time.Hour

// Labels of the Secrets setup creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "aicr-operator-setup"
)

// Options are the flags.
type Options struct {
	Kubeconfig string
	Namespace  string
	Instance   string
	LogLevel   string
	LogFormat  string
	Timeout    time.Duration

	NATSAuthSecret  string
	NATSUsers       string
	NATSTLSSecret   string
	NATSTLSNames    string
	NATSTLSValidity time.Duration
	WebhookSecret   string
	WebhookNames    string
	WebhookValidity time.Duration
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	ns := cmp.Or(os.Getenv("POD_NAMESPACE"), v1alpha1.DefaultNamespace)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.Namespace, "namespace", ns, "namespace of the Secrets (the operator namespace)")
	fs.StringVar(&o.Instance, "instance", "", "the Helm release, set as app.kubernetes.io/instance on the Secrets")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: trace, debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", logging.FormatJSON, "log format: json or console")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up after this long (the Job retries)")
	fs.StringVar(&o.NATSAuthSecret, "nats-auth-secret", "", "Secret of the NATS passwords and their bcrypt hashes (empty: none)")
	fs.StringVar(&o.NATSUsers, "nats-users", strings.Join(append(v1alpha1.Binaries(), RouteUser), ","), "comma-separated NATS users; every one but route gets a bcrypt hash")
	fs.StringVar(&o.NATSTLSSecret, "nats-tls-secret", "", "Secret of NATS's CA and server certificate (empty: none)")
	fs.StringVar(&o.NATSTLSNames, "nats-tls-dns-names", "", "comma-separated DNS names of NATS's certificate, the first its common name")
	fs.StringVar(&o.WebhookSecret, "webhook-tls-secret", "", "Secret of the webhook's CA and serving certificate (empty: none)")
	fs.StringVar(&o.WebhookNames, "webhook-tls-dns-names", "", "comma-separated DNS names of the webhook's certificate, the first its common name")
	fs.DurationVar(&o.NATSTLSValidity, "nats-tls-validity", DefaultValidity, "validity of NATS's generated CA and certificate")
	fs.DurationVar(&o.WebhookValidity, "webhook-tls-validity", DefaultValidity, "validity of the webhook's generated CA and certificate")
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Validate checks the flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []string
	if e := validation.IsDNS1123Label(o.Namespace); len(e) > 0 {
		errs = append(errs, fmt.Sprintf("--namespace %q: a namespace name is required", o.Namespace))
	}
	for _, f := range []struct{ flag, name string }{{"--nats-auth-secret", o.NATSAuthSecret}, {"--nats-tls-secret", o.NATSTLSSecret}, {"--webhook-tls-secret", o.WebhookSecret}} {
		if f.name != "" && len(validation.IsDNS1123Subdomain(f.name)) > 0 {
			errs = append(errs, fmt.Sprintf("%s %q: a Secret name (DNS-1123 subdomain) is required", f.flag, f.name))
		}
	}
	if o.NATSAuthSecret != "" {
		for _, u := range split(o.NATSUsers) {
			if len(validation.IsConfigMapKey(u)) > 0 || strings.HasSuffix(u, secrets.HashSuffix) {
				errs = append(errs, fmt.Sprintf("--nats-users: %q is not a user name usable as a Secret key", u))
			}
		}
		if len(split(o.NATSUsers)) == 0 {
			errs = append(errs, "--nats-users: at least one user is required with --nats-auth-secret")
		}
	}
	for _, f := range []struct{ flag, secret, names string }{{"--nats-tls-dns-names", o.NATSTLSSecret, o.NATSTLSNames}, {"--webhook-tls-dns-names", o.WebhookSecret, o.WebhookNames}} {
		if f.secret != "" && len(split(f.names)) == 0 {
			errs = append(errs, fmt.Sprintf("%s: the certificate's DNS names are required with its Secret", f.flag))
		}
	}
	for _, v := range []struct {
		flag string
		d    time.Duration
	}{{"--nats-tls-validity", o.NATSTLSValidity}, {"--webhook-tls-validity", o.WebhookValidity}} {
		if v.d < 24*time.Hour {
			errs = append(errs, fmt.Sprintf("%s %s: use at least 24h", v.flag, v.d))
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, "--timeout must be positive")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Main parses args, runs and returns the exit code: 2 for bad flags, 1 when a Secret could not
// be made, 0 when every one exists. The reason for a non-zero exit is a log line.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	var o Options
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := logging.New(stderr, o.LogFormat, o.LogLevel, Name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return 2
	}
	logging.RouteLibraries(log)
	build := buildinfo.Get()
	log.Info().Str("version", build.Version).Str("revision", build.Revision).Str("go", build.GoVersion).Msg(Name + " starting")
	if err := o.Validate(); err != nil {
		log.Error().Err(err).Msg(Name + " exits")
		return 2
	}
	if err := Run(logging.Into(ctx, log), o); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg(Name + " exits")
		return 1
	}
	return 0
}

// Run makes every Secret the flags name.
func Run(ctx context.Context, o Options) error {
	cfg, err := service.KubeConfig(o.Kubeconfig, 20, 40, Name)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	return Ensure(ctx, kc, o)
}

// Ensure makes every Secret the options name, with kc.
func Ensure(ctx context.Context, kc kubernetes.Interface, o Options) error {
	log := logging.From(ctx)
	labels := map[string]string{"app.kubernetes.io/part-of": "aicr-operator", LabelManagedBy: ManagedBy}
	if o.Instance != "" {
		labels["app.kubernetes.io/instance"] = o.Instance
	}
	client := kc.CoreV1().Secrets(o.Namespace)
	if o.NATSAuthSecret != "" {
		users := split(o.NATSUsers)
		hashed := make([]string, 0, len(users))
		for _, u := range users {
			if u != RouteUser {
				hashed = append(hashed, u)
			}
		}
		res, err := secrets.Passwords(ctx, client, o.NATSAuthSecret, labels, users, hashed)
		if err != nil {
			return fmt.Errorf("nats passwords: %w", err)
		}
		log.Info().Str(logging.KeyResourceName, o.NATSAuthSecret).Str(logging.KeyOutcome, string(res)).Msg("nats passwords")
	}
	for _, c := range []struct {
		what, secret, names string
		validity            time.Duration
	}{{"nats certificate", o.NATSTLSSecret, o.NATSTLSNames, o.NATSTLSValidity}, {"webhook certificate", o.WebhookSecret, o.WebhookNames, o.WebhookValidity}} {
		if c.secret == "" {
			continue
		}
		names := split(c.names)
		res, err := secrets.TLS(ctx, client, c.secret, labels, secrets.Certificate{CommonName: names[0], DNSNames: names, Validity: c.validity})
		if err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		log.Info().Str(logging.KeyResourceName, c.secret).Str(logging.KeyOutcome, string(res)).Msg(c.what)
	}
	return nil
}
