package app

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerCredentials reads a login from Docker's config.json as docker login writes it, from a
// credential helper it names, and nothing (anonymous) for a registry it does not know.
func TestDockerCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	// A credential helper is a program docker-credential-<name> that answers get with JSON.
	bin := t.TempDir()
	helper := "#!/bin/sh\nread host\n[ \"$1\" = get ] && [ \"$host\" = helped.example.com ] && echo '{\"ServerURL\":\"helped.example.com\",\"Username\":\"AWS\",\"Secret\":\"from-helper\"}'\n"
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-fake"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	login := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	config := `{"auths":{"registry.example.com":{"auth":"` + login + `"},"token.example.com":{"identitytoken":"tok"}},` +
		`"credHelpers":{"helped.example.com":"fake"}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"registry.example.com": "alice:s3cret", "helped.example.com": "AWS:from-helper", "other.example.com": ":"} {
		got, err := dockerCredentials(host)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if got.Username+":"+got.Password != want {
			t.Errorf("%s: login %q, want %q", host, got.Username+":"+got.Password, want)
		}
	}
	_, err := dockerCredentials("token.example.com")
	if err == nil || !strings.Contains(err.Error(), "is a token") || strings.Contains(err.Error(), "tok\"") {
		t.Errorf("a token login: %v; want an error saying it is a token, without it", err)
	}
}
