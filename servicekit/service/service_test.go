package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 15 * time.Second

// defaults returns the options BindFlags gives with no flags passed.
func defaults(t *testing.T) Options {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return o
}

func TestOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		edit func(o *Options)
		want []string // fragments; empty: valid
	}{
		"the defaults":                  {edit: func(*Options) {}},
		"leader election, well tuned":   {edit: func(o *Options) { o.LeaderElect = true }},
		"health and metrics turned off": {edit: func(o *Options) { o.HealthAddr, o.MetricsAddr = "", "" }},
		"no NATS URL": {
			edit: func(o *Options) { o.NATSURL = "" },
			want: []string{"--nats-url is required"},
		},
		"a NATS user without a password file": {
			edit: func(o *Options) { o.NATSUser = "aicr" },
			want: []string{"--nats-user needs --nats-password-file"},
		},
		"a NATS CA only: TLS, the server's certificate checked": {edit: func(o *Options) { o.NATSTLSCA = "/ca.crt" }},
		"a NATS client certificate and its key": {
			edit: func(o *Options) { o.NATSTLSCA, o.NATSTLSCert, o.NATSTLSKey = "/ca.crt", "/tls.crt", "/tls.key" },
		},
		"a NATS client certificate without its key": {
			edit: func(o *Options) { o.NATSTLSCert = "/tls.crt" },
			want: []string{"--nats-tls-cert and --nats-tls-key go together: pass both or neither"},
		},
		"a NATS client key without its certificate": {
			edit: func(o *Options) { o.NATSTLSKey = "/tls.key" },
			want: []string{"--nats-tls-cert and --nats-tls-key go together"},
		},
		"no NATS ping interval": {
			edit: func(o *Options) { o.NATSPingInterval = 0 },
			want: []string{"--nats-ping-interval 0s: use a positive duration"},
		},
		"no outstanding NATS ping allowed": {
			edit: func(o *Options) { o.NATSMaxPingsOut = 0 },
			want: []string{"--nats-max-pings-outstanding 0: use 1 or more"},
		},
		"two stream replicas": {
			edit: func(o *Options) { o.StreamReplicas = 2 },
			want: []string{"--stream-replicas 2: use 1, 3 or 5"},
		},
		"no kube QPS": {
			edit: func(o *Options) { o.KubeQPS = 0 },
			want: []string{"--kube-qps and --kube-burst must be positive"},
		},
		"a negative kube burst": {
			edit: func(o *Options) { o.KubeBurst = -1 },
			want: []string{"--kube-qps and --kube-burst must be positive"},
		},
		"a health address without a port": {
			edit: func(o *Options) { o.HealthAddr = "8081" },
			want: []string{`--health-addr "8081": use host:port or :port`},
		},
		"a metrics address without a port": {
			edit: func(o *Options) { o.MetricsAddr = "localhost" },
			want: []string{`--metrics-addr "localhost": use host:port or :port`},
		},
		"no namespace": {
			edit: func(o *Options) { o.Namespace = "" },
			want: []string{"--namespace is required"},
		},
		"no engine namespace": {
			edit: func(o *Options) { o.EngineNamespace = "" },
			want: []string{`--engine-namespace "": a namespace name is required`},
		},
		"an engine namespace that is no namespace name": {
			edit: func(o *Options) { o.EngineNamespace = "Argo_CD" },
			want: []string{`--engine-namespace "Argo_CD": a namespace name is required (a lowercase RFC 1123 label`},
		},
		"leader election without an identity": {
			edit: func(o *Options) { o.LeaderElect, o.Identity = true, "" },
			want: []string{"--identity is required with --leader-elect"},
		},
		"a renew deadline longer than the lease": {
			edit: func(o *Options) { o.LeaderElect, o.RenewDeadline = true, 20*time.Second },
			want: []string{"leader election needs lease duration > renew deadline > retry period > 0"},
		},
		"every problem is reported at once, in flag order": {
			edit: func(o *Options) {
				o.NATSURL, o.StreamReplicas, o.HealthAddr, o.MetricsAddr, o.Namespace = "", 0, "x", "y", ""
			},
			want: []string{`invalid flags: --nats-url is required; --stream-replicas 0: use 1, 3 or 5; ` +
				`--health-addr "x": use host:port or :port; --metrics-addr "y": use host:port or :port; --namespace is required`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := defaults(t)
			tc.edit(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", o)
			}
			for _, frag := range tc.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q lacks %q", err, frag)
				}
			}
		})
	}
}

// TestBindFlagsEnvironment proves the pod's namespace and name become the defaults.
func TestBindFlagsEnvironment(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "gpu-ops")
	t.Setenv("POD_NAME", "planner-7d9f-x2")
	o := defaults(t)
	if o.Namespace != "gpu-ops" || o.Identity != "planner-7d9f-x2" {
		t.Errorf("namespace, identity = %s, %s; want gpu-ops, planner-7d9f-x2", o.Namespace, o.Identity)
	}
}

// get fetches url and returns the status and body; a transport error is status 0.
func get(url string) (int, string) {
	resp, err := http.Get(url) //nolint:noctx // test helper
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// eventually is servicetest.Eventually with these tests' waitTimeout.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	servicetest.Eventually(t, waitTimeout, what, cond)
}

// TestStartServesReadyz proves a binary started against a NATS server connects to it and
// reports ready on /readyz, serves /healthz and /metrics, and that a failing
// check makes /readyz name it.
func TestStartServesReadyz(t *testing.T) {
	o := defaults(t)
	o.NATSURL = natstest.Start(t).URL
	o.HealthAddr = "127.0.0.1:0"
	o.MetricsAddr = "127.0.0.1:0"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "log.json"))
	if err != nil {
		t.Fatalf("create log file: %v", err)
	}
	defer logFile.Close()

	b, err := Start("planner", o, false, logFile)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer b.Close()
	if b.Kube != nil || b.KubeClient != nil {
		t.Errorf("a Kubernetes client without needKube")
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	healthAddr, metricsAddr, err := b.Serve(gctx, g)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if strings.HasSuffix(healthAddr, ":0") || strings.HasSuffix(metricsAddr, ":0") || healthAddr == metricsAddr {
		t.Fatalf("bound addresses %s and %s, want two real ports", healthAddr, metricsAddr)
	}

	eventually(t, "/readyz to report ready", func() (bool, string) {
		code, body := get("http://" + healthAddr + "/readyz")
		return code == http.StatusOK, body
	})
	if code, body := get("http://" + healthAddr + "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get("http://" + metricsAddr + "/metrics")
	build := buildinfo.Get()
	buildInfo := fmt.Sprintf(`aicr_build_info{binary="planner",goversion=%q,revision=%q,version=%q} 1`, build.GoVersion, build.Revision, build.Version)
	for _, want := range []string{"go_goroutines", `aicr_ready{binary="planner"} 1`, `aicr_leader{binary="planner"} 1`, buildInfo} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics = %d without %s", code, want)
		}
	}

	logged, err := os.ReadFile(logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	if starting := fmt.Sprintf(`"version":%q,"revision":%q`, build.Version, build.Revision); !strings.Contains(string(logged), starting) || !strings.Contains(string(logged), `"message":"planner starting"`) {
		t.Errorf("the log does not start with the build (%s):\n%s", starting, logged)
	}

	b.AddCheck("plan-store", func(context.Context) error { return errors.New("configmaps are forbidden") })
	if code, body := get("http://" + healthAddr + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "plan-store: configmaps are forbidden") {
		t.Errorf("/readyz with a failing check = %d %q, want 503 naming the check", code, body)
	}
	if _, body := get("http://" + metricsAddr + "/metrics"); !strings.Contains(body, `aicr_ready{binary="planner"} 0`) {
		t.Errorf("/metrics with a failing check lacks aicr_ready 0")
	}

	cancel()
	if err := g.Wait(); err != nil {
		t.Errorf("servers stopped with %v, want nil", err)
	}
	if code, _ := get("http://" + healthAddr + "/healthz"); code != 0 {
		t.Errorf("/healthz still answers %d after shutdown", code)
	}
	b.Close()
	b.Close() // safe twice
	if !b.NC.IsClosed() {
		t.Errorf("NATS connection still open after Close")
	}
}

// TestServeMetricsOnTheHealthPort proves one address may serve health and metrics together.
func TestServeMetricsOnTheHealthPort(t *testing.T) {
	o := defaults(t)
	o.NATSURL = natstest.Start(t).URL
	b, err := Start("applier", o, false, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer b.Close()
	b.opts.HealthAddr = servicetest.FreeAddr(t)
	b.opts.MetricsAddr = b.opts.HealthAddr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	healthAddr, metricsAddr, err := b.Serve(gctx, g)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if metricsAddr != "" {
		t.Errorf("metrics address = %q, want none of its own", metricsAddr)
	}
	if code, _ := get("http://" + healthAddr + "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics on the health address = %d", code)
	}
	cancel()
	_ = g.Wait()
}

func TestStartRefusesBadOptions(t *testing.T) {
	cases := map[string]struct {
		edit func(o *Options)
		want string
	}{
		"a bad log level": {edit: func(o *Options) { o.LogLevel = "loud" }, want: `--log-level "loud"`},
		"a password file that does not exist": {
			edit: func(o *Options) { o.NATSUser, o.NATSPasswordFile = "aicr", filepath.Join(t.TempDir(), "missing") },
			want: "read --nats-password-file",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := defaults(t)
			tc.edit(&o)
			b, err := Start("planner", o, false, nil)
			if err == nil {
				b.Close()
				t.Fatalf("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunLeaderWithoutElection proves work runs at once when leader election is off, and that
// election without a Kubernetes client is refused.
func TestRunLeaderWithoutElection(t *testing.T) {
	b := &Base{Name: "planner", opts: Options{}}
	ran := false
	if err := b.RunLeader(context.Background(), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("RunLeader = %v, ran %v; want nil, true", err, ran)
	}
	b.opts.LeaderElect = true
	if err := b.RunLeader(context.Background(), func(context.Context) error { return nil }); err == nil {
		t.Errorf("RunLeader with election and no Kubernetes client succeeded")
	}
}
