// Package natsx connects a binary to NATS, waiting and retrying while the server is
// unreachable. It links no NATS server: tests start one with testkit/natstest.
package natsx

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

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
	// InboxPrefix is the prefix of the connection's reply inboxes (bus.InboxPrefix of the
	// identity), the only subjects the identity may subscribe to; nats's _INBOX when empty.
	InboxPrefix string
	// TLSCA is --nats-tls-ca: the CA that signed the server's certificate. With it the
	// connection requires TLS; without it a server that requires TLS is verified against the
	// system's roots.
	TLSCA string
	// TLSCert and TLSKey are --nats-tls-cert and --nats-tls-key: a client certificate, for a
	// server that verifies clients. Both or neither.
	TLSCert, TLSKey string
	// PingInterval and MaxPingsOut are --nats-ping-interval and --nats-max-pings-outstanding:
	// the connection sends a PING every PingInterval and is dropped as stale, and another server
	// tried, once more than MaxPingsOut went unanswered. DefaultPingInterval and
	// DefaultMaxPingsOut when zero.
	PingInterval time.Duration
	MaxPingsOut  int
}

// The connection's liveness check. A server cut off by a network that drops packets (a node
// gone dark, a partition) closes no connection: the client learns of it only from its pings. At
// nats.go's defaults (a PING every 2 minutes, 2 outstanding) a binary stays on such a server for
// 4 to 6 minutes, its publishes and pulls unanswered; at these it moves to another server after
// 2 to 3 seconds. A PING and its PONG are a few bytes a second per binary.
const (
	DefaultPingInterval = time.Second
	DefaultMaxPingsOut  = 2
)

// tlsOptions returns the TLS options of o. The files are read again at every (re)connection, so
// a renewed certificate or CA is picked up without a restart; a file that does not load now is
// an error naming its flag.
func (o ConnectOptions) tlsOptions() ([]nats.Option, error) {
	if o.TLSCA == "" && o.TLSCert == "" && o.TLSKey == "" {
		return nil, nil
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together: pass both or neither")
	}
	var certCB nats.TLSCertHandler
	var rootsCB nats.RootCAsHandler
	if o.TLSCA != "" {
		rootsCB = func() (*x509.CertPool, error) {
			raw, err := os.ReadFile(o.TLSCA)
			if err != nil {
				return nil, fmt.Errorf("read --nats-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(raw) {
				return nil, fmt.Errorf("--nats-tls-ca %s holds no PEM certificate", o.TLSCA)
			}
			return pool, nil
		}
	}
	if o.TLSCert != "" {
		certCB = func() (tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("load --nats-tls-cert %s and --nats-tls-key %s: %w", o.TLSCert, o.TLSKey, err)
			}
			return c, nil
		}
	}
	return []nats.Option{
		nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}),
		nats.ClientTLSConfig(certCB, rootsCB),
	}, nil
}

// Explain adds to a connection error what to do about it, naming the flag to set: the errors a
// wrong TLS or identity setup gives are otherwise hard to read.
func (o ConnectOptions) Explain(err error) error {
	if err == nil {
		return nil
	}
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA) || (errors.As(err, &verify) && !errors.As(err, &hostname)):
		if o.TLSCA == "" {
			return fmt.Errorf("%w: the NATS server speaks TLS with a certificate this binary does not trust; pass the CA that signed it with --nats-tls-ca", err)
		}
		return fmt.Errorf("%w: the NATS server's certificate is not signed by the CA in --nats-tls-ca %s", err, o.TLSCA)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: the NATS server's certificate is not for the host in --nats-url; use a name the certificate lists", err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("%w: the NATS server does not speak TLS, but --nats-tls-ca or a tls:// --nats-url asks for it", err)
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return fmt.Errorf("%w: the NATS server requires a client certificate it trusts: pass --nats-tls-cert and --nats-tls-key", err)
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(msg), "authorization violation"):
		return fmt.Errorf("%w: the NATS server refuses this identity: check --nats-user and --nats-password-file (or --nats-creds)", err)
	}
	return err
}

// Status is nil when nc is connected, else the connection's state and, when there is one, the
// last error explained.
func (o ConnectOptions) Status(nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("nats is %s: %w", nc.Status(), o.Explain(err))
	}
	return fmt.Errorf("nats is %s", nc.Status())
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
		nats.PingInterval(cmp.Or(o.PingInterval, DefaultPingInterval)),
		nats.MaxPingsOutstanding(cmp.Or(o.MaxPingsOut, DefaultMaxPingsOut)),
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
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	tlsOpts, err := o.tlsOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, tlsOpts...)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redactURL(o.URL), o.Explain(err))
	}
	go o.reportConnectErrors(nc, log)
	return nc, nil
}

// connectReportInterval is how often a connection that is not up is checked for a new error.
const connectReportInterval = 2 * time.Second

// reportConnectErrors logs, explained, each new error that keeps nc from connecting (a TLS or
// identity mismatch: a server that is merely down leaves no error), until nc is closed. nats
// retries forever, so without this such a mistake would show only as "not ready".
func (o ConnectOptions) reportConnectErrors(nc *nats.Conn, log zerolog.Logger) {
	t := time.NewTicker(connectReportInterval)
	defer t.Stop()
	last := ""
	for range t.C {
		if nc.IsClosed() {
			return
		}
		err := nc.LastError()
		if nc.IsConnected() || err == nil {
			last = ""
			continue
		}
		if err.Error() != last {
			last = err.Error()
			log.Error().Err(o.Explain(err)).Str("url", redactURL(o.URL)).Msg("cannot connect to nats")
		}
	}
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
