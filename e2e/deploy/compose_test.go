package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// composeServices is what docker-compose config says of the services of a profile.
type composeServices map[string]struct {
	Command   []string       `json:"command"`
	Image     string         `json:"image"`
	Profiles  []string       `json:"profiles"`
	DependsOn map[string]any `json:"depends_on"`
}

func composeConfig(t *testing.T, env []string, args ...string) composeServices {
	t.Helper()
	dc := charttest.Tool(t, "docker-compose")
	root := charttest.RepoRoot(t)
	file := filepath.Join(root, "deploy", "compose", "docker-compose.yaml")
	out, err := charttest.Run(t, root, env, dc, append([]string{"-f", file}, append(args, "config")...)...)
	if err != nil {
		t.Fatalf("docker-compose %v config: %v", args, err)
	}
	var cfg struct {
		Services composeServices `json:"services"`
	}
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("read docker-compose config output: %v", err)
	}
	return cfg.Services
}

// docker-compose accepts the compose file (with the kind profile's settings); every binary gets
// the flags the chart passes and the replicas of the chart's defaults (two appliers, two
// webhooks); the cluster container and Argo CD are profile "cluster", the external kubeconfig's
// import profile "kind", and nothing outside a profile waits for a service of one (the operator
// waits for "kubeconfig", which either profile feeds). docker-compose 1.29's config ignores
// --profile, so the profiles are read from the file.
func TestComposeConfig(t *testing.T) {
	services := composeConfig(t, []string{"AICR_KUBECONFIG=" + filepath.Join(t.TempDir(), "kind-kubeconfig"), "AICR_NETWORK=kind"})
	replicas := map[string][]string{
		v1alpha1.BinaryPlanner: {"planner"}, v1alpha1.BinaryApplier: {"applier-1", "applier-2"}, v1alpha1.BinaryReadiness: {"readiness"},
		v1alpha1.BinaryCredRefresher: {"credrefresher"}, v1alpha1.BinaryAdmission: {"admission-1", "admission-2"},
	}
	for _, b := range v1alpha1.Binaries() {
		for _, name := range replicas[b] {
			svc, ok := services[name]
			if !ok {
				t.Errorf("service %s is missing", name)
				continue
			}
			args := strings.Join(svc.Command, " ")
			for _, want := range []string{"--nats-url=tls://nats-1:4222,tls://nats-2:4222,tls://nats-3:4222", "--nats-tls-ca=/secrets/nats-ca.crt",
				"--nats-user=" + b, "--nats-password-file=/secrets/" + b + "-password", "--kubeconfig=/shared/kubeconfig-" + b,
				"--namespace=aicr-system", "--stream-replicas=3"} {
				if !strings.Contains(args, want) {
					t.Errorf("service %s: command %q lacks %s", name, args, want)
				}
			}
			if want := "aicr-operator/" + b + ":dev"; svc.Image != want {
				t.Errorf("service %s: image %s, want %s", name, svc.Image, want)
			}
		}
	}
	profiles := map[string][]string{
		"init": nil, "kubeconfig": nil, "registry": nil, "nats-1": nil, "nats-2": nil, "nats-3": nil,
		"cluster": {"cluster"}, "redis": {"cluster"}, "repo-server": {"cluster"}, "application-controller": {"cluster"},
		"kubeconfig-import": {"kind"},
	}
	for name, want := range profiles {
		svc, ok := services[name]
		if !ok {
			t.Errorf("service %s is missing", name)
			continue
		}
		if !slices.Equal(svc.Profiles, want) {
			t.Errorf("service %s: profiles %v, want %v", name, svc.Profiles, want)
		}
	}
	for name, svc := range services {
		if len(svc.Profiles) > 0 {
			continue
		}
		for dep := range svc.DependsOn {
			if len(services[dep].Profiles) > 0 {
				t.Errorf("service %s (every profile) depends on %s, which runs only in profile %v", name, dep, services[dep].Profiles)
			}
		}
	}
}
