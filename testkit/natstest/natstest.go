// Package natstest starts an in-process JetStream server on a random loopback port for tests.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is a running test server.
type Server struct {
	*server.Server
	// URL is the client URL.
	URL string
	// StoreDir is JetStream's directory (kept across Restart).
	StoreDir string
	opts     *server.Options
	t        testing.TB
}

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

// Connect returns a client connection closed when the test ends.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
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
