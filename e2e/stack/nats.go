package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// natsReady bounds the embedded server accepting connections.
const natsReady = 10 * time.Second

// natsSetup is the bus as the chart runs it: TLS required, one user per binary with the
// permissions of the one table in shared/bus (natstest.Config renders them), and an observer for
// the tests. The files live in <Dir>/nats-secrets.
type natsSetup struct {
	tls       tlstest.Files
	passwords map[string]string
	files     map[string]string
}

func newNATSSetup(dir string) (*natsSetup, error) {
	secrets := filepath.Join(dir, "nats-secrets")
	f, err := tlstest.Write(filepath.Join(secrets, "tls"), "aicr-stack-nats")
	if err != nil {
		return nil, err
	}
	n := &natsSetup{tls: f, passwords: map[string]string{}, files: map[string]string{}}
	for _, id := range append(v1alpha1.Binaries(), natstest.Observer) {
		n.passwords[id] = natstest.RandomPassword()
		n.files[id] = filepath.Join(secrets, id+".password")
		if err := os.WriteFile(n.files[id], []byte(n.passwords[id]), 0o600); err != nil {
			return nil, fmt.Errorf("write nats password of %s: %w", id, err)
		}
	}
	return n, nil
}

// config is the server configuration, listening on listen and monitoring on monitor (none when
// empty), with JetStream in storeDir.
func (n *natsSetup) config(listen, monitor, storeDir string) natstest.Config {
	return natstest.Config{Listen: listen, Monitor: monitor, StoreDir: storeDir, ServerName: "aicr-stack", TLS: &n.tls, Passwords: n.passwords}
}

// writeConfig writes c to <dir>/nats.conf and returns the path.
func writeConfig(dir string, c natstest.Config) (string, error) {
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, c.Render(), 0o600); err != nil {
		return "", fmt.Errorf("write nats configuration: %w", err)
	}
	return path, nil
}

// startEmbedded runs the configuration in-process on a random loopback port.
func (n *natsSetup) startEmbedded(dir string) (*server.Server, error) {
	path, err := writeConfig(dir, n.config("127.0.0.1:-1", "", filepath.Join(dir, "nats")))
	if err != nil {
		return nil, err
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats configuration %s: %w", path, err)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("create nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(natsReady) {
		srv.Shutdown()
		return nil, fmt.Errorf("nats server did not become ready within %s", natsReady)
	}
	return srv, nil
}

// natsFlags are a binary's NATS flags: its identity, its password file, the stack's CA.
func (n *natsSetup) natsFlags(binary string) []string {
	return []string{"--nats-user=" + binary, "--nats-password-file=" + n.files[binary], "--nats-tls-ca=" + n.tls.CA}
}

// ConnectNATS connects to the stack's NATS as the observer, which may read every stream and
// subscribe to every subject (no binary's identity may): a test's own eyes on the bus.
func (s *Stack) ConnectNATS(ctx context.Context, name string) (*nats.Conn, error) {
	if s.natsSetup == nil {
		return nil, fmt.Errorf("connect to nats: the stack has no NATS")
	}
	nc, err := nats.Connect(s.NATSURL, nats.Name(name), nats.UserInfo(natstest.Observer, s.natsSetup.passwords[natstest.Observer]),
		nats.RootCAs(s.natsSetup.tls.CA))
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s as the observer: %w", s.NATSURL, err)
	}
	return nc, nil
}
