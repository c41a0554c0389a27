// Package charttest renders the operator's Helm chart (helm template) and runs the NATS it
// deploys: the rendered nats.conf, with the Secrets the chart's setup Job makes (per-binary
// passwords and their hashes, TLS certificates; RunSetup), in the real nats-server binary
// hack/tools.sh builds, on loopback, its environment as the StatefulSet sets it. The tests of
// deploy/ (e2e/deploy) and of the trust boundary (e2e/security) share it.
package charttest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// The release the tests render, as docs/install.md installs it.
const (
	Release     = "aicr-operator"
	Namespace   = "aicr-system"
	KubeVersion = "1.34.0"
	Repository  = "registry.example.com/aicr"
)

// StackAPIVersions are the API groups the operator's own stack brings (cert-manager, the
// Prometheus Operator), whose objects the chart renders only where they are served. Render renders
// for a cluster whose stack is up, passing them as --api-versions; RenderOn with none for a fresh one.
var StackAPIVersions = []string{"cert-manager.io/v1", "monitoring.coreos.com/v1"}

// Named timeouts.
const (
	// natsStartTimeout bounds nats-server answering its health check.
	natsStartTimeout = 30 * time.Second
	// natsStopTimeout bounds a clean exit after SIGTERM.
	natsStopTimeout = 15 * time.Second
)

// RepoRoot is the repository root: the folder holding go.work.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's folder")
		}
		dir = parent
	}
}

// ChartDir is the operator chart's folder.
func ChartDir(t testing.TB) string {
	return filepath.Join(RepoRoot(t), "deploy", "charts", "aicr-operator")
}

// Tool finds a command: in $AICR_TOOLS_BIN, in hack/tools.sh's cache (when built), or on the
// PATH. It skips the test when the tool is missing, or fails it with AICR_REQUIRE_TOOLS=1.
func Tool(t testing.TB, name string) string {
	t.Helper()
	var candidates []string
	if dir := os.Getenv(testenv.EnvToolsBin); dir != "" {
		candidates = append(candidates, filepath.Join(dir, name))
	}
	if out, err := exec.Command(filepath.Join(RepoRoot(t), "hack", "tools.sh"), "path", name).Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			candidates = append(candidates, filepath.Join(dir, "bin", name))
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	msg := name + " not found in $AICR_TOOLS_BIN, the tools cache or PATH (hack/tools.sh ensure " + name + ")"
	if os.Getenv(testenv.EnvRequireTools) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Run runs a command and returns its standard output; standard error is in the error.
func Run(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Render runs helm template on the chart with --set pairs, for a cluster that serves
// StackAPIVersions, and returns the objects, or helm's error.
func Render(t testing.TB, release, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return RenderOn(t, StackAPIVersions, release, namespace, set...)
}

// RenderOn is Render for a cluster that serves the API versions apiVersions beyond the built-in
// ones (none: a fresh cluster).
func RenderOn(t testing.TB, apiVersions []string, release, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	helm := Tool(t, "helm")
	args := []string{"template", release, ChartDir(t), "--namespace", namespace, "--kube-version", KubeVersion}
	for _, v := range apiVersions {
		args = append(args, "--api-versions", v)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := Run(t, "", []string{"HELM_CACHE_HOME=" + t.TempDir(), "HELM_CONFIG_HOME=" + t.TempDir(), "HELM_DATA_HOME=" + t.TempDir()}, helm, args...)
	if err != nil {
		return nil, err
	}
	return Decode(t, out), nil
}

// MustRender renders release Release in Namespace with a registry repository and set.
func MustRender(t testing.TB, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render(t, Release, Namespace, append([]string{"registry.repository=" + Repository}, set...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return objs
}

// Decode splits a rendered manifest into objects.
func Decode(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decode rendered manifest: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the object of kind and name, nil when there is none.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// NATSConf is the NATS server configuration the chart renders.
func NATSConf(t testing.TB, objs []*unstructured.Unstructured) string {
	t.Helper()
	s := Find(objs, "Secret", Release+"-nats-config")
	if s == nil {
		t.Fatalf("no Secret %s-nats-config", Release)
	}
	conf, _, _ := unstructured.NestedString(s.Object, "stringData", "nats.conf")
	return conf
}

// SecretData returns a rendered Secret's data, decoded.
func SecretData(t testing.TB, objs []*unstructured.Unstructured, name string) map[string][]byte {
	t.Helper()
	s := Find(objs, "Secret", name)
	if s == nil {
		t.Fatalf("the chart renders no Secret %s", name)
	}
	data, _, _ := unstructured.NestedStringMap(s.Object, "data")
	out := map[string][]byte{}
	for k, v := range data {
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("Secret %s key %s does not decode: %v", name, k, err)
		}
		out[k] = raw
	}
	return out
}

// NATSOptions shape StartNATS.
type NATSOptions struct {
	// Set are more --set values for the render.
	Set []string
	// LoopbackTLS serves a certificate for 127.0.0.1 from a fresh CA instead of the chart's,
	// which is for the in-cluster names only: for clients that cannot name the server (the
	// binaries take a URL, and 127.0.0.1 is all there is).
	LoopbackTLS bool
	// Observer adds a user ObserverUser that may do anything, with password
	// NATS.ObserverPassword: the test's own eyes on the streams, never a binary's identity.
	Observer bool
}

// ObserverUser is the user NATSOptions.Observer adds.
const ObserverUser = "test-observer"

// NATS is a nats-server running the chart's configuration.
type NATS struct {
	// URL is the client URL (tls:// when TLS is on).
	URL string
	// Monitor is the monitoring endpoint's base URL.
	Monitor string
	// CAFile is the CA the clients trust (the chart's, or the loopback one).
	CAFile string
	// ServerName is the name clients verify the certificate for: the chart Service's, or
	// empty with LoopbackTLS (127.0.0.1).
	ServerName string
	// Passwords and PasswordFiles hold each binary's password from <release>-nats-auth, the
	// files as the chart mounts them into its pod.
	Passwords     map[string]string
	PasswordFiles map[string]string
	// Secrets are what the setup Job made, by name (RunSetup).
	Secrets map[string]map[string][]byte
	// Env is the server's environment as the chart's StatefulSet sets it (the hashes, the
	// route password).
	Env []string
	// ObserverPassword is ObserverUser's password (NATSOptions.Observer).
	ObserverPassword string
	// Conf is the configuration the server runs.
	Conf string
	// Objects is the rendered chart.
	Objects []*unstructured.Unstructured
	// Log is nats-server's log file.
	Log string
}

// CheckNATS renders the chart and has the real nats-server check its nats.conf (nats-server -t:
// the syntax, every option, the certificate files), with loopback ports and the store, pid file
// and certificates in a temporary folder. It returns the server StartNATS would run.
func CheckNATS(t testing.TB, o NATSOptions) *NATS {
	t.Helper()
	n, _ := prepareNATS(t, o)
	return n
}

// StartNATS is CheckNATS, then runs the configuration in the real nats-server; it is stopped
// when the test ends.
func StartNATS(t testing.TB, o NATSOptions) *NATS {
	t.Helper()
	n, path := prepareNATS(t, o)
	startNATS(t, n, path)
	return n
}

func prepareNATS(t testing.TB, o NATSOptions) (*NATS, string) {
	t.Helper()
	bin := Tool(t, "nats-server")
	objs := MustRender(t, o.Set...)
	conf := NATSConf(t, objs)
	if !strings.Contains(conf, "authorization") {
		t.Fatalf("the chart's nats.conf has no authorization block:\n%s", conf)
	}
	dir := t.TempDir()
	n := &NATS{Objects: objs, Passwords: map[string]string{}, PasswordFiles: map[string]string{}, Log: filepath.Join(dir, "nats-server.log"),
		Secrets: RunSetup(t, objs), Env: []string{"POD_NAME=" + Release + "-nats-0"}}
	auth := n.Secrets[Release+"-nats-auth"]
	if auth == nil {
		t.Fatalf("the setup Job makes no Secret %s-nats-auth", Release)
	}
	for _, user := range v1alpha1.Binaries() {
		n.Env = append(n.Env, strings.ToUpper(user)+"_PASSWORD_HASH="+string(auth[user+".bcrypt"]))
	}
	n.Env = append(n.Env, "ROUTE_PASSWORD="+string(auth["route"]))
	tlsDir := filepath.Join(dir, "tls")
	tlsOn := strings.Contains(conf, "/etc/nats-tls/")
	if tlsOn {
		if o.LoopbackTLS {
			f, err := tlstest.Write(tlsDir, "chart nats")
			if err != nil {
				t.Fatal(err)
			}
			for from, to := range map[string]string{f.CA: "ca.crt", f.ServerCert: "tls.crt", f.ServerKey: "tls.key"} {
				if err := os.Rename(from, filepath.Join(tlsDir, to)); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			if err := os.MkdirAll(tlsDir, 0o700); err != nil {
				t.Fatal(err)
			}
			tlsData := n.Secrets[Release+"-nats-tls"]
			if tlsData == nil {
				t.Fatalf("the setup Job makes no Secret %s-nats-tls", Release)
			}
			for k, v := range tlsData {
				if err := os.WriteFile(filepath.Join(tlsDir, k), v, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			n.ServerName = Release + "-nats." + Namespace + ".svc"
		}
		n.CAFile = filepath.Join(tlsDir, "ca.crt")
	}
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	conf = strings.NewReplacer(
		"listen: 0.0.0.0:4222", "listen: 127.0.0.1:"+strconv.Itoa(ports[0]),
		"http_port: 8222", "http: 127.0.0.1:"+strconv.Itoa(ports[1]),
		"store_dir: /data", fmt.Sprintf("store_dir: %q", filepath.Join(dir, "js")),
		`pid_file: "/var/run/nats/nats.pid"`, `pid_file: "`+filepath.Join(dir, "nats.pid")+`"`,
		"/etc/nats-tls/", tlsDir+"/",
	).Replace(conf)
	if o.Observer {
		n.ObserverPassword = fmt.Sprintf("%x", time.Now().UnixNano())
		conf = strings.Replace(conf, "users: [", fmt.Sprintf("users: [\n        {user: %s, password: %q}", ObserverUser, n.ObserverPassword), 1)
	}
	n.Conf = conf
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := Run(t, "", n.Env, bin, "-c", path, "-t"); err != nil {
		t.Fatalf("nats-server rejects the chart's configuration: %v %s\n%s", err, out, conf)
	}
	for _, user := range v1alpha1.Binaries() {
		pw := auth[user]
		if len(pw) < 32 {
			t.Fatalf("the chart's password of %s has %d characters", user, len(pw))
		}
		n.Passwords[user] = string(pw)
		n.PasswordFiles[user] = filepath.Join(dir, user+".password")
		if err := os.WriteFile(n.PasswordFiles[user], pw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	scheme := "nats://"
	if tlsOn {
		scheme = "tls://"
	}
	n.URL = scheme + "127.0.0.1:" + strconv.Itoa(ports[0])
	n.Monitor = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	return n, path
}

func startNATS(t testing.TB, n *NATS, path string) {
	t.Helper()
	bin := Tool(t, "nats-server")
	logf, err := os.Create(n.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path)
	cmd.Env = append(os.Environ(), n.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(natsStopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	err = testenv.WaitFor(context.Background(), natsStartTimeout, "nats-server healthy", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			log, _ := os.ReadFile(n.Log)
			return false, fmt.Errorf("nats-server exited:\n%s", log)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.Monitor+"/healthz?js-enabled-only=true", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TLSConfig is what a client needs to trust the server: its CA and the name its certificate is
// for. Nil without TLS.
func (n *NATS) TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	if n.CAFile == "" {
		return nil
	}
	raw, err := os.ReadFile(n.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		t.Fatalf("%s holds no certificate", n.CAFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: n.ServerName, MinVersion: tls.VersionTLS12}
}

// ClientOptions are the options of a connection as identity, as the binaries connect: its
// password, its own inbox prefix, and TLS.
func (n *NATS) ClientOptions(t testing.TB, identity string) []nats.Option {
	t.Helper()
	opts := []nats.Option{nats.UserInfo(identity, n.Passwords[identity]), nats.CustomInboxPrefix(bus.InboxPrefix(identity)),
		nats.Name("test-" + identity)}
	if c := n.TLSConfig(t); c != nil {
		opts = append(opts, nats.Secure(c))
	}
	return opts
}

// ObserverOptions are the options of a connection as ObserverUser.
func (n *NATS) ObserverOptions(t testing.TB) []nats.Option {
	t.Helper()
	if n.ObserverPassword == "" {
		t.Fatal("the chart's NATS runs without an observer (NATSOptions.Observer)")
	}
	opts := []nats.Option{nats.UserInfo(ObserverUser, n.ObserverPassword), nats.Name("test-observer")}
	if c := n.TLSConfig(t); c != nil {
		opts = append(opts, nats.Secure(c))
	}
	return opts
}

// LastSeq is the last sequence number stored in stream (0 for none), from the monitoring
// endpoint: it needs no identity, so it sees what no binary may read.
func (n *NATS) LastSeq(t testing.TB, stream string) uint64 {
	t.Helper()
	resp, err := http.Get(n.Monitor + "/jsz?streams=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					LastSeq uint64 `json:"last_seq"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		t.Fatalf("decode /jsz: %v", err)
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.LastSeq
			}
		}
	}
	return 0
}
