//go:build integration

package app

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// TestBundlePush pushes examples/bundle.yaml to the environment's registry (the distribution
// registry, behind htpasswd) with the password on standard input: it prints the artifact's
// digest and the spec.bundle.oci to use, the artifact pulls back to the same document, a second
// push gives the same digest, and an anonymous push is refused with the registry's answer.
func TestBundlePush(t *testing.T) {
	env := testenv.Current(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "bundle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo := env.Registry.Host + "/aicr/bundles/gpu-stack"
	push := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code := Main(ctx, append([]string{"bundle", "push", filepath.Join("..", "..", "..", "examples", "bundle.yaml"),
			"--repository", repo, "--plain-http"}, args...),
			Env{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Clock: clock.RealClock{}})
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := push(registryAuth.Password+"\n", "--username", registryAuth.Username, "--password-stdin")
	if code != ExitOK {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	want := ociregistry.BundleArtifact(doc).Digest()
	for _, line := range []string{"pushed bundle gpu-stack 1.2.0 to " + repo + ":1.2.0", "digest: " + want,
		"    oci:\n      repository: " + repo + "\n      digest: " + want} {
		if !strings.Contains(out, line) {
			t.Errorf("push printed:\n%s\nwant %q in it", out, line)
		}
	}
	client := ociregistry.New(ociregistry.Options{PlainHTTP: true,
		Credentials: ociregistry.Credentials{Username: registryAuth.Username, Password: registryAuth.Password}})
	r, err := ociregistry.ParseRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.PullBundle(context.Background(), r, want, 1<<20)
	if err != nil || string(got) != string(doc) {
		t.Fatalf("pull the pushed bundle: %v (same document: %v)", err, string(got) == string(doc))
	}
	tag, err := client.Resolve(context.Background(), ociregistry.Reference{Repository: r, Tag: "1.2.0"})
	if err != nil || tag.Digest != want {
		t.Fatalf("tag 1.2.0 resolves to %+v, %v; want %s", tag, err, want)
	}
	// The same document again, under another tag: the same digest.
	code, out, errOut = push(registryAuth.Password, "--username", registryAuth.Username, "--password-stdin", "-o", "jsonpath={.digest}")
	if code != ExitOK || out != want {
		t.Fatalf("second push: exit %d, printed %q (%s); want %s", code, out, errOut, want)
	}
	// No credentials, and none in Docker's configuration: the registry's refusal, exit 1.
	dockerConfig := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	code, _, errOut = push("")
	if code != ExitFailed || !strings.Contains(errOut, "401 Unauthorized") || !strings.Contains(errOut, "the registry needs credentials and none were given") {
		t.Fatalf("anonymous push: exit %d: %s; want exit 1 with the registry's 401", code, errOut)
	}
	// No flags, the login in Docker's config.json (as docker login writes it): the push uses it.
	login := base64.StdEncoding.EncodeToString([]byte(registryAuth.Username + ":" + registryAuth.Password))
	config := `{"auths":{"` + env.Registry.Host + `":{"auth":"` + login + `"}}}`
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = push("", "-o", "jsonpath={.digest}")
	if code != ExitOK || out != want {
		t.Fatalf("push with Docker's login: exit %d, printed %q (%s); want %s", code, out, errOut, want)
	}
}
