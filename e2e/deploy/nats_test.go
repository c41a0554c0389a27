//go:build integration

package deploy

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

const natsTimeout = 10 * time.Second

// The chart's NATS configuration, run by a real nats-server: each binary's user publishes its
// own subjects through JetStream and is refused everyone else's.
func TestChartNATSPermissions(t *testing.T) {
	objs := mustRender(t)
	conf := natsConf(t, objs)
	dir := t.TempDir()
	conf = strings.NewReplacer(
		"listen: 0.0.0.0:4222", "listen: 127.0.0.1:-1",
		"http_port: 8222", "",
		"store_dir: /data", "store_dir: "+filepath.Join(dir, "js"),
		`pid_file: "/var/run/nats/nats.pid"`, `pid_file: "`+filepath.Join(dir, "nats.pid")+`"`,
	).Replace(conf)
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "aicr-operator-nats-0")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the chart's configuration: %v\n%s", err, conf)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(natsTimeout) {
		t.Fatal("nats-server did not start")
	}

	auth := find(objs, "Secret", "aicr-operator-nats-auth")
	data, _, _ := unstructured.NestedStringMap(auth.Object, "data")
	password := func(user string) string {
		raw, err := base64.StdEncoding.DecodeString(data[user])
		if err != nil || len(raw) < 32 {
			t.Fatalf("password of %s: %d bytes, err %v", user, len(raw), err)
		}
		return string(raw)
	}

	type conn struct {
		js   jetstream.JetStream
		nc   *nats.Conn
		errs chan error
	}
	connect := func(user, pass string) (*conn, error) {
		errs := make(chan error, 16)
		// On a loaded machine the server's first PING can overtake the handshake ("expected
		// 'PONG', got 'PING'"); the binaries retry connecting forever, so the test retries too.
		var nc *nats.Conn
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			nc, err = nats.Connect(srv.ClientURL(), nats.UserInfo(user, pass), nats.Name(user), nats.Timeout(natsTimeout),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
			if err == nil || strings.Contains(err.Error(), "Authorization") {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		return &conn{js: js, nc: nc, errs: errs}, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	planner, err := connect("planner", password("planner"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatch.EnsureStreams(ctx, planner.js, 1); err != nil {
		t.Fatalf("planner declares the streams: %v", err)
	}

	own := map[string][]string{
		"planner":       {bus.ApplySubject("cluster", "gpu-operator"), bus.RemoveSubject("cluster", "gpu-operator")},
		"applier":       {bus.AppliedSubject("cluster", "gpu-operator")},
		"readiness":     {bus.VerdictSubject("cluster", "gpu-operator"), bus.DriftSubject("cluster", "gpu-operator"), bus.SubjectEngine},
		"credrefresher": {bus.SubjectCredentials},
		"admission":     {bus.SubjectAudit},
	}
	for user, subjects := range own {
		t.Run(user, func(t *testing.T) {
			c := planner
			if user != "planner" {
				if c, err = connect(user, password(user)); err != nil {
					t.Fatalf("connect as %s: %v", user, err)
				}
			}
			for _, s := range subjects {
				pctx, cancel := context.WithTimeout(ctx, natsTimeout)
				if _, err := c.js.Publish(pctx, s, []byte(`{}`)); err != nil {
					t.Errorf("%s cannot publish its own subject %s: %v", user, s, err)
				}
				cancel()
			}
			for other, subjects := range own {
				if other == user {
					continue
				}
				s := subjects[0]
				if err := c.nc.Publish(s, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
				if err := c.nc.FlushTimeout(natsTimeout); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-c.errs:
					if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
						t.Errorf("%s publishing %s's subject %s: %v, want a permissions violation", user, other, s, err)
					}
				case <-time.After(natsTimeout):
					t.Errorf("%s published %s's subject %s without a permissions violation", user, other, s)
				}
			}
		})
	}
	if _, err := connect("applier", password("planner")); err == nil {
		t.Error("the applier connected with the planner's password")
	}
}
