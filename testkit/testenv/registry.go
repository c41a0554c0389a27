package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"
)

// Registry describes the OCI registry of an environment.
type Registry struct {
	// Host is 127.0.0.1:<port>; the registry speaks plain HTTP.
	Host string
	// Auth is Options.RegistryAuth (nil: no authentication).
	Auth *BasicAuth
}

// Chart is a chart PushChart pushed.
type Chart struct {
	Name    string
	Version string
	// Repo is the chart's OCI repository, the repoURL of an Application:
	// oci://127.0.0.1:<port>/<repository>/<name>.
	Repo string
	// Digest is the manifest digest, sha256:<hex>, usable as an Application's targetRevision.
	Digest string
}

func (e *Env) startRegistry(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	dir, err := e.path(ProcRegistry)
	if err != nil {
		return err
	}
	storage, err := e.path(ProcRegistry, "storage")
	if err != nil {
		return err
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("generate registry secret: %w", err)
	}
	config := map[string]any{
		"version": "0.1",
		"log":     map[string]any{"level": "info", "accesslog": map[string]any{"disabled": false}},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": storage},
			"delete":     map[string]any{"enabled": true},
		},
		"http": map[string]any{"addr": host, "secret": hex.EncodeToString(secret)},
	}
	if a := e.opts.RegistryAuth; a != nil {
		htpasswd, err := htpasswdLine(a.Username, a.Password)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(path, htpasswd, 0o600); err != nil {
			return fmt.Errorf("write htpasswd: %w", err)
		}
		config["auth"] = map[string]any{"htpasswd": map[string]any{"realm": "aicr-testenv", "path": path}}
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return fmt.Errorf("encode registry config: %w", err)
	}
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		return fmt.Errorf("write registry config: %w", err)
	}
	e.Registry = &Registry{Host: host, Auth: e.opts.RegistryAuth}
	spec := procSpec{
		name: ProcRegistry,
		path: e.bin("registry"),
		args: []string{"serve", configPath},
		// no tracing exporter to dial
		env: []string{"OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"},
	}
	return e.launch(ctx, spec, registryReadyTimeout, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			return false, fmt.Errorf("build request: %w", err)
		}
		_, err = doProbe(probeClient, req, http.StatusOK, http.StatusUnauthorized)
		return err == nil, err
	})
}

// htpasswdLine is one "user:bcrypt-hash" line, the only hash the registry accepts. The hash is
// of bcrypt's lowest cost: the registry checks it on every request it is sent (no session), and
// at the default cost that made it one of the busiest processes of make test (22 CPU-seconds in
// an e2e package's first two minutes, with Argo CD pulling charts). A test registry's password
// is random and lives as long as the test; the cost guards nothing here.
func htpasswdLine(user, password string) ([]byte, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return nil, fmt.Errorf("hash registry password: %w", err)
	}
	return []byte(user + ":" + string(hash) + "\n"), nil
}

// digestLine is how helm push reports the manifest digest.
var digestLine = regexp.MustCompile(`(?m)^Digest:\s+(sha256:[0-9a-f]{64})\s*$`)

// PushChart packages the chart in chartDir (helm package) and pushes it (helm push --plain-http)
// to oci://<Registry.Host>/<repository>, with the registry's credentials if it has any. helm runs
// with its cache, config and data homes inside Dir.
func (e *Env) PushChart(ctx context.Context, chartDir, repository string) (Chart, error) {
	if e.Registry == nil {
		return Chart{}, fmt.Errorf("push chart %s: the environment has no registry (Options.Registry)", chartDir)
	}
	var meta struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return Chart{}, fmt.Errorf("read chart metadata: %w", err)
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil || meta.Name == "" || meta.Version == "" {
		return Chart{}, fmt.Errorf("read chart metadata %s: want name and version (err: %v)", chartDir, err)
	}
	out, err := e.path("helm", "packages")
	if err != nil {
		return Chart{}, err
	}
	if _, err := e.helm(ctx, "package", chartDir, "--destination", out); err != nil {
		return Chart{}, err
	}
	tgz := filepath.Join(out, meta.Name+"-"+meta.Version+".tgz")
	repository = strings.Trim(repository, "/")
	args := []string{"push", tgz, "oci://" + e.Registry.Host + "/" + repository, "--plain-http"}
	if a := e.Registry.Auth; a != nil {
		args = append(args, "--username", a.Username, "--password", a.Password)
	}
	log, err := e.helm(ctx, args...)
	if err != nil {
		return Chart{}, err
	}
	m := digestLine.FindSubmatch(log)
	if m == nil {
		return Chart{}, fmt.Errorf("push chart %s: no digest in helm output: %s", meta.Name, log)
	}
	return Chart{
		Name:    meta.Name,
		Version: meta.Version,
		Repo:    "oci://" + e.Registry.Host + "/" + repository + "/" + meta.Name,
		Digest:  string(m[1]),
	}, nil
}

// helm runs the helm binary with state inside Dir and returns its combined output.
func (e *Env) helm(ctx context.Context, args ...string) ([]byte, error) {
	env := inheritedEnv()
	for k, elem := range map[string][]string{
		"HELM_CACHE_HOME":  {"helm", "cache"},
		"HELM_CONFIG_HOME": {"helm", "config"},
		"HELM_DATA_HOME":   {"helm", "data"},
		"HOME":             {"helm", "home"},
	} {
		p, err := e.path(elem...)
		if err != nil {
			return nil, err
		}
		env = append(env, k+"="+p)
	}
	env = append(env, "HELM_REGISTRY_CONFIG="+filepath.Join(e.Dir, "helm", "registry.json"), "KUBECONFIG="+e.Kubeconfig)
	cmd := exec.CommandContext(ctx, e.bin("helm"), args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run helm %s: %w: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}
