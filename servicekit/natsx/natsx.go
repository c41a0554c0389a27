// Package natsx connects a binary to NATS, waiting and retrying while the server is
// unreachable, and can run an embedded JetStream server for the local stack.
package natsx

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// ConnectOptions say how to reach NATS.
type ConnectOptions struct {
	// URL is the server URL list (comma-separated).
	URL string
	// Name is the connection name (the binary's Name).
	Name string
	// CredsFile is a NATS credentials file (user JWT and NKey seed); optional.
	CredsFile string
	// User and Password authenticate with a user and password; optional.
	User     string
	Password string
}

// Connect returns a connection that keeps retrying in the background: it returns at once even
// when the server is down (nc.IsConnected() says when it is up) and reconnects forever. A NATS
// restart therefore never stops a binary.
func Connect(o ConnectOptions, log zerolog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected") }),
		nats.ConnectHandler(func(nc *nats.Conn) { log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats connected") }),
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redactURL(o.URL), err)
	}
	return nc, nil
}

// redactURL hides the user information of every URL in a comma-separated server list: nats
// URLs may carry user:password@ or token@, and any of them may.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		at := strings.LastIndexByte(p, '@')
		if at < 0 {
			continue
		}
		lead := p[:len(p)-len(strings.TrimLeft(p, " "))]
		scheme := "nats://"
		if j := strings.Index(p, "://"); j >= 0 && j < at {
			scheme = strings.TrimSpace(p[:j+3])
		}
		parts[i] = lead + scheme + "<redacted>@" + p[at+1:]
	}
	return strings.Join(parts, ",")
}

// WaitConnected blocks until nc is connected or ctx ends.
func WaitConnected(ctx context.Context, nc *nats.Conn) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// EmbeddedOptions configure an in-process JetStream server.
type EmbeddedOptions struct {
	// Addr is host:port to listen on ("127.0.0.1:0" for a random port).
	Addr string
	// StoreDir holds JetStream's files.
	StoreDir string
}

// StartEmbedded starts an in-process NATS server with JetStream and waits until it accepts
// connections. Shut it down with Shutdown and WaitForShutdown.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("--embedded-nats-addr %q: use host:port: %w", o.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--embedded-nats-addr %q: port is not a number", o.Addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "aicr-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("create embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats on %s did not become ready", o.Addr)
	}
	return s, nil
}
