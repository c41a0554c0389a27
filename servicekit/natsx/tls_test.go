package natsx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// syncBuffer is a log sink read while the connection writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTLSConnections proves each TLS setup against a server that requires TLS (or does not):
// the right one connects, and every wrong one stays down with a status, and a log line, that
// names the flag to fix.
func TestTLSConnections(t *testing.T) {
	secure := natstest.StartWith(t, natstest.Options{TLS: true})
	mutual := natstest.StartWith(t, natstest.Options{TLS: true, VerifyClients: true})
	plain := natstest.Start(t)
	other, err := tlstest.Write(t.TempDir(), "another")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		url  string
		opts ConnectOptions
		want string // empty: connects
	}{
		"the server's CA":                        {url: secure.URL, opts: ConnectOptions{TLSCA: secure.TLS.CA}},
		"a tls:// URL with the server's CA":      {url: strings.Replace(secure.URL, "nats://", "tls://", 1), opts: ConnectOptions{TLSCA: secure.TLS.CA}},
		"a client certificate where verified":    {url: mutual.URL, opts: ConnectOptions{TLSCA: mutual.TLS.CA, TLSCert: mutual.TLS.ClientCert, TLSKey: mutual.TLS.ClientKey}},
		"no CA: the server is not trusted":       {url: secure.URL, want: "pass the CA that signed it with --nats-tls-ca"},
		"another CA":                             {url: secure.URL, opts: ConnectOptions{TLSCA: other.CA}, want: "is not signed by the CA in --nats-tls-ca " + other.CA},
		"no client certificate where verified":   {url: mutual.URL, opts: ConnectOptions{TLSCA: mutual.TLS.CA}, want: "pass --nats-tls-cert and --nats-tls-key"},
		"TLS asked of a server that speaks none": {url: plain.URL, opts: ConnectOptions{TLSCA: secure.TLS.CA}, want: "the NATS server does not speak TLS"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := tc.opts
			o.URL, o.Name = tc.url, "planner"
			logs := &syncBuffer{}
			nc, err := Connect(o, zerolog.New(logs))
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			t.Cleanup(nc.Close)
			if tc.want == "" {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				if err := WaitConnected(ctx, nc); err != nil {
					t.Fatalf("not connected: %v", o.Status(nc))
				}
				if err := o.Status(nc); err != nil {
					t.Errorf("Status of a connected connection: %v", err)
				}
				if _, err := nc.TLSConnectionState(); err != nil {
					t.Errorf("the connection does not speak TLS: %v", err)
				}
				return
			}
			servicetest.Poll(t, waitTimeout, "the explained status", func() error {
				if err := o.Status(nc); err == nil || !strings.Contains(err.Error(), tc.want) {
					return fmt.Errorf("status %v, want one saying %q", err, tc.want)
				}
				return nil
			})
			servicetest.Poll(t, waitTimeout, "the log line", func() error {
				if !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "cannot connect to nats") {
					return fmt.Errorf("log %q, want a line saying %q", logs, tc.want)
				}
				return nil
			})
			if nc.IsConnected() {
				t.Error("connected with a wrong TLS setup")
			}
		})
	}
	t.Run("a certificate without its key is refused before connecting", func(t *testing.T) {
		_, err := Connect(ConnectOptions{URL: secure.URL, TLSCA: secure.TLS.CA, TLSCert: secure.TLS.ClientCert}, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), "--nats-tls-cert and --nats-tls-key go together") {
			t.Errorf("Connect = %v, want the pair named", err)
		}
	})
}

// TestPlainClientIsRefusedByATLSServer proves a client that does not speak TLS gets nothing
// through a server that requires it: its CONNECT and PUB, sent in the clear, are never answered
// and the server closes the connection.
func TestPlainClientIsRefusedByATLSServer(t *testing.T) {
	secure := natstest.StartWith(t, natstest.Options{TLS: true})
	_, js := secure.Connect(t)
	u, err := url.Parse(secure.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("the server's greeting %q (%v) does not require TLS", info, err)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPUB aicr.v1.evt.engine 2\r\n{}\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := r.ReadString('\n')
	if err == nil {
		t.Fatalf("the server answered a plain client: %q", rest)
	}
	if strings.Contains(rest, "PONG") {
		t.Fatalf("the server answered PING in the clear: %q", rest)
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		t.Fatalf("the server kept the plain connection open until the deadline")
	}
	// Nothing the plain client sent was acted on: no stream exists.
	names := js.StreamNames(context.Background())
	for n := range names.Name() {
		t.Errorf("a stream %s exists after a plain client's publish", n)
	}
}

// TestInboxPrefix proves a connection's replies arrive under its identity's inbox, the only
// subjects its identity may subscribe to: a JetStream API call as the readiness identity gets its
// answer.
func TestInboxPrefix(t *testing.T) {
	srv := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	o := ConnectOptions{URL: srv.URL, Name: v1alpha1.BinaryReadiness, User: v1alpha1.BinaryReadiness, Password: srv.Passwords[v1alpha1.BinaryReadiness],
		InboxPrefix: bus.InboxPrefix(v1alpha1.BinaryReadiness), TLSCA: srv.TLS.CA}
	nc, err := Connect(o, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := WaitConnected(ctx, nc); err != nil {
		t.Fatalf("not connected: %v", o.Status(nc))
	}
	if got := nc.NewInbox(); !strings.HasPrefix(got, bus.InboxPrefix(v1alpha1.BinaryReadiness)+".") {
		t.Errorf("inbox %s, want one under %s", got, bus.InboxPrefix(v1alpha1.BinaryReadiness))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, bus.StreamEvents); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("STREAM.INFO as readiness = %v, want the server's answer: stream not found", err)
	}

	t.Run("a wrong password is explained", func(t *testing.T) {
		bad := o
		bad.Password = "wrong"
		nc, err := Connect(bad, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		servicetest.Poll(t, waitTimeout, "the explained status", func() error {
			if err := bad.Status(nc); err == nil || !strings.Contains(err.Error(), "check --nats-user and --nats-password-file") {
				return fmt.Errorf("status %v", err)
			}
			return nil
		})
	})
}
