//go:build integration

package security

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// natsStartTimeout bounds the nats-server accepting connections.
const natsStartTimeout = 10 * time.Second

// binaries are the five NATS identities the chart renders, one per binary.
var binaries = v1alpha1.Binaries()

// chartNATS is a nats-server running the Helm chart's rendered configuration.
type chartNATS struct {
	URL string
	// passwords are the generated passwords by user, from the chart's <release>-nats-auth Secret.
	passwords map[string]string
	// passwordFiles hold each password as the chart mounts it into its binary's pod.
	passwordFiles map[string]string
}

// repoRoot is the repository root (the folder holding deploy/ and examples/).
func repoRoot(t *testing.T) string {
	t.Helper()
	charts, err := stack.ChartsDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(charts))
}

// helmBinary finds helm in AICR_TOOLS_BIN or PATH; without it the test is skipped unless
// AICR_REQUIRE_TOOLS=1.
func helmBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(testenv.EnvToolsBin); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "helm")); err == nil {
			return filepath.Join(dir, "helm")
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv(testenv.EnvRequireTools) == "1" {
		t.Fatal("helm not found in $AICR_TOOLS_BIN or PATH (hack/tools.sh ensure helm)")
	}
	t.Skip("helm not found in $AICR_TOOLS_BIN or PATH")
	return ""
}

// renderChart runs helm template on the operator chart and returns its Secrets by name.
func renderChart(t *testing.T) map[string]map[string]any {
	t.Helper()
	cmd := exec.Command(helmBinary(t), "template", "aicr-operator", filepath.Join(repoRoot(t), "deploy", "charts", "aicr-operator"),
		"--namespace", "aicr-system", "--kube-version", "1.34.0", "--set", "registry.repository=registry.example.com/aicr")
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, stderr.String())
	}
	secrets := map[string]map[string]any{}
	for _, doc := range strings.Split(string(out), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj["kind"] != "Secret" {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		secrets[name] = obj
	}
	return secrets
}

// startChartNATS runs the chart's nats.conf (authorization with one user per binary and its
// publish and subscribe permissions) in-process, listening on a free local port.
func startChartNATS(t *testing.T) *chartNATS {
	t.Helper()
	secrets := renderChart(t)
	cfgSecret, auth := secrets["aicr-operator-nats-config"], secrets["aicr-operator-nats-auth"]
	if cfgSecret == nil || auth == nil {
		t.Fatal("the chart renders no aicr-operator-nats-config or aicr-operator-nats-auth Secret")
	}
	conf, _ := cfgSecret["stringData"].(map[string]any)["nats.conf"].(string)
	if !strings.Contains(conf, "authorization") {
		t.Fatalf("the chart's nats.conf has no authorization block:\n%s", conf)
	}
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
		t.Fatalf("nats-server rejects the chart's configuration: %v", err)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(natsStartTimeout) {
		t.Fatal("nats-server did not start")
	}

	data, _ := auth["data"].(map[string]any)
	c := &chartNATS{URL: srv.ClientURL(), passwords: map[string]string{}, passwordFiles: map[string]string{}}
	for _, user := range binaries {
		enc, _ := data[user].(string)
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(raw) == 0 {
			t.Fatalf("the chart's password of %s does not decode: %v", user, err)
		}
		c.passwords[user] = string(raw)
		file := filepath.Join(dir, user+".password")
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		c.passwordFiles[user] = file
	}
	return c
}
