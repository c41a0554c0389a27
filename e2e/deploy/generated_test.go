package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// TestNATSPermissionsAreGenerated proves every copy of the bus's permissions outside Go is the
// one table of shared/bus, as make generate writes it: the chart's files/nats-permissions.json,
// the tables of docs/security.md, and the docker-compose route's nats.conf (read by nats-server's
// own parser, which also finds TLS required there).
func TestNATSPermissionsAreGenerated(t *testing.T) {
	root := charttest.RepoRoot(t)
	t.Run("the chart's nats-permissions.json", func(t *testing.T) {
		got, err := os.ReadFile(filepath.Join(charttest.ChartDir(t), "files", "nats-permissions.json"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(bus.PermissionsJSON()), string(got)); diff != "" {
			t.Errorf("files/nats-permissions.json is stale; run make generate (-want +got):\n%s", diff)
		}
	})
	t.Run("docs/security.md", func(t *testing.T) {
		doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := bus.ReplaceDocSection(string(doc))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(doc)); diff != "" {
			t.Errorf("the tables of docs/security.md are stale; run make generate (-want +got):\n%s", diff)
		}
	})
	t.Run("the docker-compose nats.conf", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(root, "deploy", "compose", "nats.conf"))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		f, err := tlstest.Write(dir, "compose")
		if err != nil {
			t.Fatal(err)
		}
		conf := strings.NewReplacer("/secrets/nats-tls.crt", f.ServerCert, "/secrets/nats-tls.key", f.ServerKey,
			"/secrets/nats-ca.crt", f.CA, "store_dir: /data", "store_dir: "+filepath.Join(dir, "js")).Replace(string(raw))
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, id := range v1alpha1.Binaries() {
			t.Setenv(strings.ToUpper(id)+"_PASSWORD", "pw-"+id)
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("nats-server rejects deploy/compose/nats.conf: %v", err)
		}
		if opts.TLSConfig == nil {
			t.Error("deploy/compose/nats.conf does not require TLS")
		}
		want := bus.ServerPermissions()
		if len(opts.Users) != len(want) {
			t.Errorf("deploy/compose/nats.conf has %d users, want %d", len(opts.Users), len(want))
		}
		for _, u := range opts.Users {
			p, ok := want[u.Username]
			if !ok {
				t.Errorf("user %s is no identity of the table", u.Username)
				continue
			}
			if u.Password != "pw-"+u.Username {
				t.Errorf("user %s does not take its password from $%s_PASSWORD", u.Username, strings.ToUpper(u.Username))
			}
			if u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil {
				t.Errorf("user %s has no publish and subscribe permissions", u.Username)
				continue
			}
			if diff := cmp.Diff(p.Publish.Allow, u.Permissions.Publish.Allow); diff != "" {
				t.Errorf("%s may publish (-table +compose); run make generate:\n%s", u.Username, diff)
			}
			if diff := cmp.Diff(p.Subscribe.Allow, u.Permissions.Subscribe.Allow); diff != "" {
				t.Errorf("%s may subscribe (-table +compose); run make generate:\n%s", u.Username, diff)
			}
		}
	})
}
