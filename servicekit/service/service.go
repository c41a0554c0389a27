package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/natsx"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Check is one readiness check: nil when ready, else why not.
type Check func(ctx context.Context) error

// Base is what Start gives a binary: its logger, metrics registry, NATS and Kubernetes
// connections, and the readiness checks /readyz runs.
type Base struct {
	// Name is the binary's Name constant.
	Name string
	// Log is the binary's logger.
	Log zerolog.Logger
	// Registry is the binary's metrics registry, served on /metrics: the Go and process
	// collectors (go_*, process_*) and everything registered through Metrics.
	Registry *prometheus.Registry
	// Metrics registers the operator's own metrics on Registry with the MetricsPrefix, so a
	// binary's metric declared as namespace "planner", name "steps_started_total" is exported
	// as aicr_planner_steps_started_total.
	Metrics prometheus.Registerer
	// Bus are the bus metrics every binary shares (aicr_bus_*, label binary): hand it to the
	// dispatch loop, and publish with Publisher.
	Bus *dispatch.Metrics
	// NC is the NATS connection; it reconnects forever.
	NC *nats.Conn
	// JS is JetStream on NC.
	JS jetstream.JetStream
	// Kube is the Kubernetes client configuration, nil when the binary needs none.
	Kube *rest.Config
	// KubeClient is a typed client on Kube, nil when Kube is nil.
	KubeClient kubernetes.Interface

	opts  Options
	fence *leaseFence // with leader election: writes only while the lease is fresh

	mu     sync.Mutex
	checks []namedCheck
	// leading is 1 while this replica does the binary's work: it holds the Lease, or the
	// binary runs without leader election (aicr_leader).
	leading atomic.Int64
}

type namedCheck struct {
	name  string
	check Check
}

// Start builds the logger, connects to NATS (without waiting for it), and loads the Kubernetes configuration when needKube. Call Close when done.
func Start(name string, o Options, needKube bool, logOut *os.File) (*Base, error) {
	log, err := newLogger(o, name, logOut)
	if err != nil {
		return nil, err
	}
	build := buildinfo.Get()
	log.Info().Str("version", build.Version).Str("revision", build.Revision).Str("go", build.GoVersion).Msg(name + " starting")
	b := &Base{Name: name, Log: log, opts: o, Registry: prometheus.NewRegistry()}
	switch ml, err := applyMemoryLimit(); {
	case err != nil:
		log.Warn().Err(err).Msg("no soft memory limit set")
	case ml.Bytes > 0 && ml.Bytes != math.MaxInt64:
		log.Info().Int64("bytes", ml.Bytes).Str("source", ml.Source).Msg("soft memory limit")
	}
	b.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b.Metrics = prometheus.WrapRegistererWithPrefix(MetricsPrefix, b.Registry)
	b.Bus = dispatch.NewMetrics(b.Metrics, name)
	if !o.LeaderElect {
		b.leading.Store(1) // every replica does the work
	}
	b.registerStateMetrics()
	password := ""
	if o.NATSPasswordFile != "" {
		raw, err := os.ReadFile(o.NATSPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("read --nats-password-file: %w", err)
		}
		password = strings.TrimSpace(string(raw))
	}
	co := natsx.ConnectOptions{
		URL: o.NATSURL, Name: name, CredsFile: o.NATSCredsFile, User: o.NATSUser, Password: password,
		InboxPrefix: bus.InboxPrefix(name),
		TLSCA:       o.NATSTLSCA, TLSCert: o.NATSTLSCert, TLSKey: o.NATSTLSKey,
		PingInterval: o.NATSPingInterval, MaxPingsOut: o.NATSMaxPingsOut,
	}
	nc, err := natsx.Connect(co, log)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.NC = nc
	if b.JS, err = jetstream.New(nc); err != nil {
		b.Close()
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	b.AddCheck("nats", func(context.Context) error { return co.Status(nc) })
	if needKube {
		cfg, err := KubeConfig(o.Kubeconfig, o.KubeQPS, o.KubeBurst, name)
		if err != nil {
			b.Close()
			return nil, err
		}
		if o.LeaderElect {
			b.fence = newLeaseFence(o.Namespace, v1alpha1.LeaseName(name), o.RenewDeadline)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &fencedTransport{next: rt, fence: b.fence} })
		}
		b.Kube = cfg
		if b.KubeClient, err = kubernetes.NewForConfig(cfg); err != nil {
			b.Close()
			return nil, fmt.Errorf("create kubernetes client: %w", err)
		}
		b.AddCheck("kube-apiserver", b.apiserverCheck())
	}
	return b, nil
}

func newLogger(o Options, name string, out *os.File) (zerolog.Logger, error) {
	if out == nil {
		out = os.Stderr
	}
	l, err := logging.New(out, o.LogFormat, o.LogLevel, name)
	if err != nil {
		return l, err
	}
	logging.RouteLibraries(l)
	return l, nil
}

// UserAgent is the user agent of a binary's API clients ("aicr-operator/planner"): what the
// API server's audit log and request logs name it by.
func UserAgent(binary string) string { return "aicr-operator/" + binary }

// KubeConfig loads a kubeconfig file, or the in-cluster configuration when path is empty, and
// sets the client's rate limits and user agent (UserAgent of userAgent).
func KubeConfig(path string, qps float64, burst int, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("load in-cluster kubernetes configuration (or pass --kubeconfig): %w", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig %s: %w", path, err)
		}
	}
	cfg.QPS = float32(qps)
	cfg.Burst = burst
	cfg.UserAgent = UserAgent(userAgent)
	return cfg, nil
}

// apiserverCheck asks the API server's /readyz, caching a success for a few seconds so that
// probes do not load it.
func (b *Base) apiserverCheck() Check {
	var mu sync.Mutex
	var okUntil time.Time
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().Before(okUntil) {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := b.KubeClient.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("kube-apiserver unreachable: %w", err)
		}
		okUntil = time.Now().Add(5 * time.Second)
		return nil
	}
}

// AddCheck adds a readiness check under name.
func (b *Base) AddCheck(name string, c Check) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checks = append(b.checks, namedCheck{name, c})
}

// Ready runs every check; nil when all pass.
func (b *Base) Ready(ctx context.Context) error {
	b.mu.Lock()
	checks := append([]namedCheck(nil), b.checks...)
	b.mu.Unlock()
	var errs []error
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// Serve runs the health and metrics HTTP servers in g until ctx ends, then shuts them down
// within 5 seconds. It returns the bound addresses (useful with port 0).
func (b *Base) Serve(ctx context.Context, g *errgroup.Group) (healthAddr, metricsAddr string, err error) {
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	health.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := b.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(b.Registry, promhttp.HandlerOpts{Registry: b.Registry}))
	// One address for both serves /metrics beside /healthz; two port-0 addresses are two
	// listeners, each on a port of its own.
	if b.opts.HealthAddr != "" && b.opts.HealthAddr == b.opts.MetricsAddr && !strings.HasSuffix(b.opts.HealthAddr, ":0") {
		health.Handle("/metrics", metrics)
		b.opts.MetricsAddr = ""
	}
	if healthAddr, err = b.listen(ctx, g, "health", b.opts.HealthAddr, health); err != nil {
		return "", "", err
	}
	if metricsAddr, err = b.listen(ctx, g, "metrics", b.opts.MetricsAddr, metrics); err != nil {
		return "", "", err
	}
	return healthAddr, metricsAddr, nil
}

func (b *Base) listen(ctx context.Context, g *errgroup.Group, what, addr string, h http.Handler) (string, error) {
	if addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s on %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", what, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return ln.Addr().String(), nil
}

// Close drains the NATS connection (finishing in-flight publishes and acknowledgements). Safe
// to call more than once.
func (b *Base) Close() {
	if b.NC != nil && !b.NC.IsClosed() {
		done := make(chan struct{})
		b.NC.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err := b.NC.Drain(); err != nil {
			b.NC.Close()
		} else {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				b.NC.Close()
			}
		}
	}
}
