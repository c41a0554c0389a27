package deploy

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// docker-compose accepts the compose file, and every binary gets the flags the chart passes.
func TestComposeConfig(t *testing.T) {
	dc := charttest.Tool(t, "docker-compose")
	root := charttest.RepoRoot(t)
	file := filepath.Join(root, "deploy", "compose", "docker-compose.yaml")
	out, err := charttest.Run(t, root, []string{"AICR_REGISTRY_REPOSITORY=registry.example.com/aicr"}, dc, "-f", file, "config")
	if err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	var cfg struct {
		Services map[string]struct {
			Command []string `json:"command"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("read docker-compose config output: %v", err)
	}
	for _, b := range v1alpha1.Binaries() {
		svc, ok := cfg.Services[b]
		if !ok {
			t.Errorf("service %s is missing", b)
			continue
		}
		args := strings.Join(svc.Command, " ")
		for _, want := range []string{"--nats-url=tls://nats:4222", "--nats-tls-ca=/secrets/nats-ca.crt", "--nats-user=" + b, "--nats-password-file=/secrets/" + b, "--kubeconfig=", "--namespace=aicr-system"} {
			if !strings.Contains(args, want) {
				t.Errorf("service %s: command %q lacks %s", b, args, want)
			}
		}
	}

	// Without the registry repository the file refuses to start, naming the variable.
	if _, err := charttest.Run(t, root, []string{"AICR_REGISTRY_REPOSITORY="}, dc, "-f", file, "config"); err == nil || !strings.Contains(err.Error(), "AICR_REGISTRY_REPOSITORY") {
		t.Errorf("docker-compose config without AICR_REGISTRY_REPOSITORY: got %v, want an error naming it", err)
	}
}
