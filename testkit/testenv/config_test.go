package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestOptionsValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		opts    Options
		wantErr string
	}{
		"defaults are valid":          {opts: Options{}},
		"full stack is valid":         {opts: Options{Kwok: true, ArgoCD: true, Registry: true, RegistryAuth: &BasicAuth{Username: "u", Password: "p"}}},
		"argo cd needs its crds":      {opts: Options{ArgoCD: true, SkipArgoCRDs: true}, wantErr: "SkipArgoCRDs"},
		"resync below a second":       {opts: Options{ArgoCDAppResync: time.Millisecond}, wantErr: "ArgoCDAppResync"},
		"auth without registry":       {opts: Options{RegistryAuth: &BasicAuth{Username: "u", Password: "p"}}, wantErr: "RegistryAuth"},
		"auth with colon in username": {opts: Options{Registry: true, RegistryAuth: &BasicAuth{Username: "u:x", Password: "p"}}, wantErr: "RegistryAuth"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.withDefaults().validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("validate = %v, want nil", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("validate = %v, want an error naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestKwokImpliesControllersAndScheduler(t *testing.T) {
	o := Options{Kwok: true}.withDefaults()
	if !o.ControllerManager || !o.Scheduler {
		t.Errorf("Kwok without ControllerManager/Scheduler: %+v", o)
	}
}

func TestHtpasswdLineIsBcrypt(t *testing.T) {
	line, err := htpasswdLine("pusher", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	user, hash, ok := strings.Cut(strings.TrimSpace(string(line)), ":")
	if !ok || user != "pusher" {
		t.Fatalf("htpasswd line %q, want pusher:<hash>", line)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte("s3cret")); err != nil {
		t.Errorf("hash does not match the password: %v", err)
	}
}

func TestDigestIsReadFromHelmPushOutput(t *testing.T) {
	out := "Pushed: 127.0.0.1:5000/charts/smoke:0.1.0\nDigest: sha256:e55291cff5394da5095c79044c4391c13a34812ec347fba647cb8387f6b25be6\n"
	m := digestLine.FindStringSubmatch(out)
	if m == nil || m[1] != "sha256:e55291cff5394da5095c79044c4391c13a34812ec347fba647cb8387f6b25be6" {
		t.Errorf("digest match = %v", m)
	}
}

func TestKwokConfigConcatenatesStages(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"pod-ready.yaml":       "kind: Stage\nmetadata:\n  name: pod-ready\n",
		"node-initialize.yaml": "---\nkind: Stage\nmetadata:\n  name: node-initialize",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := kwokConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeYAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "node-initialize" || objs[1].GetName() != "pod-ready" {
		t.Errorf("config holds %d documents (%s), want node-initialize and pod-ready", len(objs), cfg)
	}
	if _, err := kwokConfig(t.TempDir()); err == nil {
		t.Error("kwokConfig of an empty folder succeeded")
	}
}

func TestInheritedEnvDropsClusterAndArgoState(t *testing.T) {
	t.Setenv("KUBECONFIG", "/home/dev/.kube/config")
	t.Setenv("ARGOCD_SERVER", "argocd.example.com")
	t.Setenv("HELM_CACHE_HOME", "/home/dev/.cache/helm")
	for _, kv := range inheritedEnv() {
		for _, bad := range []string{"KUBECONFIG=", "ARGOCD_", "HELM_"} {
			if strings.HasPrefix(kv, bad) {
				t.Errorf("child environment inherits %s", kv)
			}
		}
	}
}
