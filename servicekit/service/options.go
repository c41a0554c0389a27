package service

import (
	"cmp"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/natsx"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Defaults.
const (
	DefaultNATSURL       = "nats://127.0.0.1:4222"
	DefaultKubeQPS       = 50
	DefaultKubeBurst     = 100
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Options are the flags every binary takes. Flags are the contract: the chart, docker-compose
// and the local stack pass the same ones.
type Options struct {
	// NATSURL is --nats-url.
	NATSURL string
	// NATSCredsFile is --nats-creds: a NATS credentials file.
	NATSCredsFile string
	// NATSUser is --nats-user; the password comes from --nats-password-file.
	NATSUser string
	// NATSPasswordFile is --nats-password-file.
	NATSPasswordFile string
	// NATSTLSCA is --nats-tls-ca: the CA of the NATS server's certificate; TLS is required with it.
	NATSTLSCA string
	// NATSTLSCert and NATSTLSKey are --nats-tls-cert and --nats-tls-key: a client certificate
	// for a NATS server that verifies clients.
	NATSTLSCert, NATSTLSKey string
	// NATSPingInterval and NATSMaxPingsOut are --nats-ping-interval and
	// --nats-max-pings-outstanding: how soon a connection to a server that went silent is
	// dropped for another (natsx.DefaultPingInterval).
	NATSPingInterval time.Duration
	NATSMaxPingsOut  int
	// StreamReplicas is --stream-replicas: JetStream replication of the streams.
	StreamReplicas int
	// ParkAfter is --park-after: failed handlings of a message before its dispatch loop parks
	// it (dispatch.Dispatcher.ParkAfter).
	ParkAfter int
	// Kubeconfig is --kubeconfig; in-cluster configuration when empty.
	Kubeconfig string
	// KubeQPS and KubeBurst are --kube-qps and --kube-burst.
	KubeQPS   float64
	KubeBurst int
	// HealthAddr is --health-addr: /healthz and /readyz.
	HealthAddr string
	// MetricsAddr is --metrics-addr: /metrics.
	MetricsAddr string
	// LogLevel is --log-level; LogFormat is --log-format (json or console).
	LogLevel  string
	LogFormat string
	// Namespace is --namespace: the operator namespace (env POD_NAMESPACE).
	Namespace string
	// EngineNamespace is --engine-namespace: Argo CD's namespace, where the Applications, the
	// AppProject and the repo-creds Secret live (the chart's engine.namespace).
	EngineNamespace string
	// LeaderElect is --leader-elect; the Lease lives in Namespace.
	LeaderElect bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Identity is --identity: this replica's leader-election identity (env POD_NAME, else the
	// host name).
	Identity string
}

// BindFlags registers the common flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	ns := cmp.Or(os.Getenv("POD_NAMESPACE"), v1alpha1.DefaultNamespace)
	id := os.Getenv("POD_NAME")
	if id == "" {
		id, _ = os.Hostname()
	}
	fs.StringVar(&o.NATSURL, "nats-url", DefaultNATSURL, "NATS server URLs, comma-separated")
	fs.StringVar(&o.NATSCredsFile, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&o.NATSUser, "nats-user", "", "NATS user name")
	fs.StringVar(&o.NATSPasswordFile, "nats-password-file", "", "file holding the NATS user's password")
	fs.StringVar(&o.NATSTLSCA, "nats-tls-ca", "", "CA certificate (PEM) of the NATS server; TLS is then required")
	fs.StringVar(&o.NATSTLSCert, "nats-tls-cert", "", "client certificate (PEM) for a NATS server that verifies clients; needs --nats-tls-key")
	fs.StringVar(&o.NATSTLSKey, "nats-tls-key", "", "key (PEM) of --nats-tls-cert")
	fs.DurationVar(&o.NATSPingInterval, "nats-ping-interval", natsx.DefaultPingInterval, "how often the NATS connection is checked with a PING")
	fs.IntVar(&o.NATSMaxPingsOut, "nats-max-pings-outstanding", natsx.DefaultMaxPingsOut, "unanswered PINGs after which the NATS connection is dropped as stale and another server is tried")
	fs.IntVar(&o.StreamReplicas, "stream-replicas", 1, "JetStream replicas of the operator's streams (1, 3 or 5)")
	fs.IntVar(&o.ParkAfter, "park-after", bus.ParkAfter, "failed handlings of a consumed message after which it is parked on the "+bus.StreamParked+" stream (kubectl aicr parked)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; in-cluster configuration when empty")
	fs.Float64Var(&o.KubeQPS, "kube-qps", DefaultKubeQPS, "Kubernetes client queries per second")
	fs.IntVar(&o.KubeBurst, "kube-burst", DefaultKubeBurst, "Kubernetes client burst")
	fs.StringVar(&o.HealthAddr, "health-addr", ":8081", "address of /healthz and /readyz (empty turns them off)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address of /metrics (empty turns it off)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: trace, debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", logging.FormatJSON, "log format: json or console")
	fs.StringVar(&o.Namespace, "namespace", ns, "the operator namespace (plans, leases, events)")
	fs.StringVar(&o.EngineNamespace, "engine-namespace", v1alpha1.DefaultEngineNamespace, "Argo CD's namespace: the Applications, the AppProject and the repo-creds Secret (engine.namespace)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader on a Lease so that replicas do not act twice")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "leader election lease duration")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "leader election renew deadline")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "leader election retry period")
	fs.StringVar(&o.Identity, "identity", id, "this replica's leader election identity")
}

// Validate checks the common flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []string
	if o.NATSURL == "" {
		errs = append(errs, "--nats-url is required")
	}
	if o.NATSUser != "" && o.NATSPasswordFile == "" {
		errs = append(errs, "--nats-user needs --nats-password-file")
	}
	if (o.NATSTLSCert == "") != (o.NATSTLSKey == "") {
		errs = append(errs, "--nats-tls-cert and --nats-tls-key go together: pass both or neither")
	}
	if o.NATSPingInterval <= 0 {
		errs = append(errs, fmt.Sprintf("--nats-ping-interval %s: use a positive duration, such as 1s", o.NATSPingInterval))
	}
	if o.NATSMaxPingsOut < 1 {
		errs = append(errs, fmt.Sprintf("--nats-max-pings-outstanding %d: use 1 or more", o.NATSMaxPingsOut))
	}
	if o.StreamReplicas != 1 && o.StreamReplicas != 3 && o.StreamReplicas != 5 {
		errs = append(errs, fmt.Sprintf("--stream-replicas %d: use 1, 3 or 5", o.StreamReplicas))
	}
	if o.ParkAfter < 1 {
		errs = append(errs, fmt.Sprintf("--park-after %d: use 1 or more", o.ParkAfter))
	}
	if o.KubeQPS <= 0 || o.KubeBurst <= 0 {
		errs = append(errs, "--kube-qps and --kube-burst must be positive")
	}
	// In flag order, so the message is the same on every run.
	for _, f := range []struct{ flagName, addr string }{{"--health-addr", o.HealthAddr}, {"--metrics-addr", o.MetricsAddr}} {
		flagName, addr := f.flagName, f.addr
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Sprintf("%s %q: use host:port or :port", flagName, addr))
		}
	}
	if o.Namespace == "" {
		errs = append(errs, "--namespace is required")
	}
	if msgs := validation.IsDNS1123Label(o.EngineNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("--engine-namespace %q: a namespace name is required (%s)", o.EngineNamespace, strings.Join(msgs, "; ")))
	}
	if o.LeaderElect {
		if o.Identity == "" {
			errs = append(errs, "--identity is required with --leader-elect")
		}
		if o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0 {
			errs = append(errs, "leader election needs lease duration > renew deadline > retry period > 0")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
	}
	return nil
}

// SetDefault changes the default of an already registered flag, for a binary whose needs differ
// from the common default (the planner and the applier raise --kube-qps, for instance). It
// panics on an unknown flag or a value the flag rejects: both are programming errors.
func SetDefault(fs *flag.FlagSet, name, value string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("default of --%s: no such flag", name))
	}
	if err := f.Value.Set(value); err != nil {
		panic(fmt.Sprintf("default of --%s: %v", name, err))
	}
	f.DefValue = value
}
