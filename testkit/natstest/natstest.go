// Package natstest starts an in-process JetStream server on a random loopback port for tests:
// open (Start), or as the operator runs it (StartWith): TLS, and one user per bus identity with
// the permissions of shared/bus's table.
package natstest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// Server is a running test server.
type Server struct {
	*server.Server
	// URL is the client URL.
	URL string
	// StoreDir is JetStream's directory (kept across Restart).
	StoreDir string
	// TLS holds the CA, server and client certificate files when the server speaks TLS.
	TLS *tlstest.Files
	// Passwords and PasswordFiles hold each identity's password when authorization is on; the
	// Observer identity may do anything (a test reads and watches with it).
	Passwords     map[string]string
	PasswordFiles map[string]string
	opts          *server.Options
	t             testing.TB
}

// Observer is the user of a StartWith server that may publish and subscribe to anything: the
// test's own eyes, never a binary's identity.
const Observer = "observer"

// Start starts a JetStream server on 127.0.0.1 with a random port and a store under
// t.TempDir(); it is shut down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	}
	s := &Server{opts: opts, StoreDir: opts.StoreDir, t: t}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// Options shape StartWith's server.
type Options struct {
	// TLS makes the server require TLS, with a certificate for 127.0.0.1 from a fresh CA.
	TLS bool
	// VerifyClients also requires a client certificate from that CA (with TLS).
	VerifyClients bool
	// Identities turns authorization on: one user per binary (v1alpha1.Binaries) with its
	// permissions from bus.ServerPermissions and a random password, plus Observer.
	Identities bool
}

// StartWith starts a JetStream server like Start, shaped by o; it is shut down when the test ends.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Listen: "127.0.0.1:-1", StoreDir: filepath.Join(dir, "js"), ServerName: "natstest", VerifyClients: o.VerifyClients}
	s := &Server{StoreDir: cfg.StoreDir, t: t}
	if o.TLS {
		f, err := tlstest.Write(filepath.Join(dir, "tls"), "natstest")
		if err != nil {
			t.Fatal(err)
		}
		s.TLS, cfg.TLS = &f, &f
	}
	if o.Identities {
		s.Passwords, s.PasswordFiles = map[string]string{}, map[string]string{}
		for _, id := range append(v1alpha1.Binaries(), Observer) {
			s.Passwords[id] = RandomPassword()
			s.PasswordFiles[id] = filepath.Join(dir, id+".password")
			if err := os.WriteFile(s.PasswordFiles[id], []byte(s.Passwords[id]), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Passwords = s.Passwords
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, cfg.Render(), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the test configuration: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	s.opts = opts
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// Config is a nats-server configuration as the operator runs it, rendered from the bus's one
// permissions table: the local stack and StartWith use it.
type Config struct {
	// Listen is host:port of clients (port -1: a random one).
	Listen string
	// Monitor is host:port of the monitoring endpoint; none when empty.
	Monitor string
	// StoreDir is JetStream's directory.
	StoreDir   string
	ServerName string
	// TLS, when set, makes TLS required with the server certificate and CA of these files.
	TLS *tlstest.Files
	// VerifyClients requires client certificates (with TLS).
	VerifyClients bool
	// Passwords, when set, turns authorization on: a user per key, with the key's permissions
	// from bus.ServerPermissions, or no restriction for Observer.
	Passwords map[string]string
}

// Render returns the configuration in JSON, which nats-server reads as its own format.
func (c Config) Render() []byte {
	conf := map[string]any{
		"listen":      c.Listen,
		"server_name": c.ServerName,
		"jetstream":   map[string]any{"store_dir": c.StoreDir},
	}
	if c.Monitor != "" {
		conf["http"] = c.Monitor
	}
	if c.TLS != nil {
		conf["tls"] = map[string]any{"cert_file": c.TLS.ServerCert, "key_file": c.TLS.ServerKey, "ca_file": c.TLS.CA, "verify": c.VerifyClients, "timeout": 5}
	}
	if c.Passwords != nil {
		perms := bus.ServerPermissions()
		var users []map[string]any
		for _, id := range append(v1alpha1.Binaries(), Observer) {
			pw, ok := c.Passwords[id]
			if !ok {
				continue
			}
			u := map[string]any{"user": id, "password": pw}
			if p, ok := perms[id]; ok {
				u["permissions"] = p
			}
			users = append(users, u)
		}
		conf["authorization"] = map[string]any{"users": users}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // nats-server's parser knows no \u escapes, and ">" is a wildcard
	enc.SetIndent("", "  ")
	if err := enc.Encode(conf); err != nil {
		panic(fmt.Sprintf("encode nats configuration: %v", err)) // strings and maps: cannot fail
	}
	return b.Bytes()
}

// RandomPassword returns a fresh password for a test identity.
func RandomPassword() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random password: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(s.opts)
	if err != nil {
		s.t.Fatalf("create nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatalf("nats server did not become ready")
	}
	s.Server = srv
	s.URL = srv.ClientURL()
	// keep the same port across restarts, so clients reconnect to it
	if addr, ok := srv.Addr().(*net.TCPAddr); ok {
		s.opts.Port = addr.Port
	}
}

// Stop shuts the server down and waits for its files to close.
func (s *Server) Stop() {
	if s.Server == nil {
		return
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Restart stops the server and starts it again on the same port with the same store: what a
// NATS restart looks like to clients.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Connect returns a client connection closed when the test ends: the Observer on a server with
// identities, trusting its CA on a TLS server.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	if s.Passwords != nil {
		return s.ConnectAs(t, Observer)
	}
	return s.connect(t, nil)
}

// ConnectAs returns a connection as identity (with its inbox prefix, as the binaries connect),
// closed when the test ends. The server must have identities.
func (s *Server) ConnectAs(t testing.TB, identity string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	pw, ok := s.Passwords[identity]
	if !ok {
		t.Fatalf("the test server has no identity %q (StartWith Options.Identities)", identity)
	}
	opts := []nats.Option{nats.UserInfo(identity, pw)}
	if identity != Observer {
		opts = append(opts, nats.CustomInboxPrefix(bus.InboxPrefix(identity)))
	}
	return s.connect(t, opts)
}

func (s *Server) connect(t testing.TB, extra []nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts := append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, extra...)
	if s.TLS != nil {
		opts = append(opts, nats.RootCAs(s.TLS.CA))
		if s.opts.TLSVerify {
			opts = append(opts, nats.ClientCert(s.TLS.ClientCert, s.TLS.ClientKey))
		}
	}
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("connect to test nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}
