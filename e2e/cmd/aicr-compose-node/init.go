package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// NATSNodes are the compose services of the NATS cluster; every binary dials all three.
var NATSNodes = []string{"nats-1", "nats-2", "nats-3"}

// RegistryUser is the registry's only user (its password: <dir>/registry-password).
const RegistryUser = "aicr"

// secretUID owns every file init writes: the binaries' user (65532).
const secretUID = 65532

// initSecrets writes into dir, once (a file already there is kept, so a restart changes
// nothing; deleting the volume rotates them): a password per binary and for the observer, the
// NATS CA and a server certificate for every node, each node's configuration (TLS required, the
// per-identity permissions of shared/bus, JetStream, the routes to the others), the webhook's CA
// and serving certificate for "admission", and the registry's password, htpasswd and config.
func initSecrets(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	dir := fs.String("dir", "/secrets", "the secrets volume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(*dir, "done")); err == nil {
		fmt.Fprintf(out, "init: %s already holds the secrets\n", *dir)
		return nil
	}
	passwords := map[string]string{}
	for _, id := range append(v1alpha1.Binaries(), natstest.Observer, "registry") {
		passwords[id] = natstest.RandomPassword()
		if err := write(*dir, id+"-password", []byte(passwords[id])); err != nil {
			return err
		}
	}
	if err := natsFiles(*dir, passwords); err != nil {
		return err
	}
	if err := webhookFiles(*dir); err != nil {
		return err
	}
	if err := registryFiles(*dir, passwords["registry"]); err != nil {
		return err
	}
	if err := write(*dir, "done", nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "init: secrets written to %s\n", *dir)
	return nil
}

func write(dir, name string, data []byte) error {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o400); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Chown(p, secretUID, secretUID); err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return nil
}

func natsFiles(dir string, passwords map[string]string) error {
	ca, err := tlstest.NewCA("aicr-compose NATS")
	if err != nil {
		return err
	}
	names := append([]string{"nats", "localhost"}, NATSNodes...)
	srv, err := ca.Issue(tlstest.Leaf{CommonName: "nats", DNSNames: names, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		return err
	}
	files := tlstest.Files{CA: filepath.Join(dir, "nats-ca.crt"), ServerCert: filepath.Join(dir, "nats-tls.crt"), ServerKey: filepath.Join(dir, "nats-tls.key")}
	for name, data := range map[string][]byte{"nats-ca.crt": ca.CertPEM, "nats-tls.crt": srv.CertPEM, "nats-tls.key": srv.KeyPEM} {
		if err := write(dir, name, data); err != nil {
			return err
		}
	}
	for _, node := range NATSNodes {
		cfg := natstest.Config{Listen: "0.0.0.0:4222", Monitor: "0.0.0.0:8222", StoreDir: "/data", ServerName: node, TLS: &files, Passwords: passwords}
		var conf map[string]any
		if err := json.Unmarshal(cfg.Render(), &conf); err != nil {
			return fmt.Errorf("nats configuration of %s: %w", node, err)
		}
		var routes []any
		for _, other := range NATSNodes {
			if other != node {
				routes = append(routes, "nats-route://"+other+":6222")
			}
		}
		conf["cluster"] = map[string]any{"name": "aicr-compose", "listen": "0.0.0.0:6222", "routes": routes}
		var raw bytes.Buffer
		enc := json.NewEncoder(&raw)
		enc.SetEscapeHTML(false) // nats-server's parser knows no \u escapes: keep '>' as it is
		enc.SetIndent("", "  ")
		if err := enc.Encode(conf); err != nil {
			return fmt.Errorf("nats configuration of %s: %w", node, err)
		}
		if err := write(dir, node+".conf", raw.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func webhookFiles(dir string) error {
	ca, err := tlstest.NewCA("aicr-compose webhook")
	if err != nil {
		return err
	}
	srv, err := ca.Issue(tlstest.Leaf{CommonName: "admission", DNSNames: []string{"admission", "localhost"}, Usage: x509.ExtKeyUsageServerAuth})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"webhook-ca.crt": ca.CertPEM, "tls.crt": srv.CertPEM, "tls.key": srv.KeyPEM} {
		if err := write(dir, name, data); err != nil {
			return err
		}
	}
	return nil
}

// registryFiles writes the registry's htpasswd (bcrypt, the only hash it accepts) and its
// configuration: plain HTTP on :5000, storage in /var/lib/registry.
func registryFiles(dir, password string) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash the registry password: %w", err)
	}
	if err := write(dir, "registry-htpasswd", []byte(RegistryUser+":"+string(hash)+"\n")); err != nil {
		return err
	}
	secret := natstest.RandomPassword()
	conf := strings.Join([]string{
		"version: 0.1",
		"log: {level: info}",
		"storage: {filesystem: {rootdirectory: /var/lib/registry}, delete: {enabled: true}}",
		"http: {addr: 0.0.0.0:5000, secret: " + secret + "}",
		"auth: {htpasswd: {realm: aicr-compose, path: " + filepath.Join(dir, "registry-htpasswd") + "}}",
		"",
	}, "\n")
	return write(dir, "registry.yml", []byte(conf))
}
