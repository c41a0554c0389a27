package natsx

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// waitTimeout bounds every wait for a connection in these tests.
const waitTimeout = 15 * time.Second

// TestConnectWaitsForTheServer proves a binary that starts before NATS gets a connection at
// once, and that connection comes up by itself once the server starts.
func TestConnectWaitsForTheServer(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL
	srv.Stop() // the port is known; nothing listens on it now

	nc, err := Connect(ConnectOptions{URL: url, Name: "planner"}, zerolog.Nop())
	if err != nil {
		t.Fatalf("Connect with the server down: %v", err)
	}
	t.Cleanup(nc.Close)
	if nc.IsConnected() {
		t.Fatalf("connected with no server listening")
	}

	srv.Restart() // same port, same store
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := WaitConnected(ctx, nc); err != nil {
		t.Fatalf("WaitConnected after the server started: %v (status %s)", err, nc.Status())
	}
	if err := nc.Publish("aicr.v1.test", []byte("x")); err != nil {
		t.Errorf("Publish on the new connection: %v", err)
	}
	if nc.Opts.Name != "planner" {
		t.Errorf("connection name = %q, want planner", nc.Opts.Name)
	}

	// A restart of NATS never closes the connection: it reconnects by itself.
	srv.Restart()
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	if err := WaitConnected(ctx2, nc); err != nil {
		t.Fatalf("WaitConnected after a NATS restart: %v (status %s)", err, nc.Status())
	}
}

func TestWaitConnectedEndsWithTheContext(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL
	srv.Stop()
	nc, err := Connect(ConnectOptions{URL: url, Name: "applier"}, zerolog.Nop())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitConnected(ctx, nc); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitConnected = %v, want context.Canceled", err)
	}
}

// TestRedactURL proves a NATS URL's credentials never reach an error message or a log.
func TestRedactURL(t *testing.T) {
	cases := map[string]struct {
		url, want string
	}{
		"no credentials":       {"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		"user and password":    {"nats://aicr:s3cret@nats.aicr-system:4222", "nats://<redacted>@nats.aicr-system:4222"},
		"a token":              {"nats://t0ken@nats:4222", "nats://<redacted>@nats:4222"},
		"a list of servers":    {"nats://a:pw1@n1:4222,nats://b:pw2@n2:4222", "nats://<redacted>@n1:4222,nats://<redacted>@n2:4222"},
		"a list, one secret":   {"nats://n1:4222, nats://b:pw2@n2:4222", "nats://n1:4222, nats://<redacted>@n2:4222"},
		"another scheme":       {"tls://u:s3cret@n1:4443", "tls://<redacted>@n1:4443"},
		"an @ in the password": {"nats://u:p@pw1@n1:4222", "nats://<redacted>@n1:4222"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := redactURL(tc.url)
			if got != tc.want {
				t.Errorf("redactURL(%q) = %q, want %q", tc.url, got, tc.want)
			}
			for _, secret := range []string{"s3cret", "t0ken", "pw1", "pw2"} {
				if strings.Contains(got, secret) {
					t.Errorf("redactURL(%q) leaks %q", tc.url, secret)
				}
			}
		})
	}
}

// TestConnectLeavesASilentServer proves a connection to a server that went silent (a network
// that drops packets: nothing closes, nothing answers) is dropped as stale and another server
// taken within a few ping intervals, not after nats.go's default of minutes.
func TestConnectLeavesASilentServer(t *testing.T) {
	srv := natstest.Start(t)
	host := strings.TrimPrefix(srv.URL, "nats://")
	a, b := newSilencer(t, host), newSilencer(t, host)
	nc, err := Connect(ConnectOptions{URL: "nats://" + a.addr() + ",nats://" + b.addr(), Name: "applier"}, zerolog.Nop())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := WaitConnected(ctx, nc); err != nil {
		t.Fatalf("WaitConnected: %v", err)
	}
	silent := a
	if strings.Contains(nc.ConnectedUrl(), b.addr()) {
		silent = b
	}
	silent.silence()
	for nc.ConnectedUrl() == "" || strings.Contains(nc.ConnectedUrl(), silent.addr()) || !nc.IsConnected() {
		select {
		case <-ctx.Done():
			t.Fatalf("still on the silent server %s after %s (status %s)", silent.addr(), waitTimeout, nc.Status())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := nc.Flush(); err != nil {
		t.Errorf("Flush on the new server: %v", err)
	}
}

// silencer forwards TCP connections to one backend until silence: from then on it holds every
// byte and closes nothing.
type silencer struct {
	ln     net.Listener
	muted  chan struct{} // closed by silence
	closed chan struct{}
}

func newSilencer(t *testing.T, backend string) *silencer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln, muted: make(chan struct{}), closed: make(chan struct{})}
	t.Cleanup(func() { close(s.closed); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.forward(c, backend)
		}
	}()
	return s
}

func (s *silencer) addr() string { return s.ln.Addr().String() }

func (s *silencer) silence() { close(s.muted) }

func (s *silencer) forward(c net.Conn, backend string) {
	b, err := net.Dial("tcp", backend)
	if err != nil {
		_ = c.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-s.muted: // held: wait for the test's end
				<-s.closed
				_ = dst.Close()
				return
			default:
			}
			if n > 0 {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				_ = dst.Close()
				return
			}
		}
	}
	go pipe(b, c)
	go pipe(c, b)
}
