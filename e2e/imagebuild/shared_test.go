package imagebuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSharedKeyFollowsTheCheckout: the key of a build changes with each input Shared promises
// to follow (a commit, an uncommitted edit, an untracked file, the version) and is the same for
// the same state.
func TestSharedKeyFollowsTheCheckout(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.go", "package a\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	o := Options{Root: root, Out: "-", Version: "v1.0.0", Revision: "r", Epoch: time.Unix(1, 0), CA: &CACertificates{Version: "1", Count: 1}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	key := func() string {
		t.Helper()
		k, err := o.key(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	seen := map[string]string{}
	step := func(what string) {
		t.Helper()
		k := key()
		if k != key() {
			t.Fatalf("%s: two keys for one state", what)
		}
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: the same key as %s", what, prev)
		}
		seen[k] = what
	}
	step("the first commit")
	write("a.go", "package a // edited\n")
	step("an uncommitted edit")
	write("b.go", "package a\n")
	step("an untracked file")
	write("b.go", "package a // edited\n")
	step("an edited untracked file")
	git("add", ".")
	git("commit", "-q", "-m", "two")
	step("a second commit")
	o.Version = "v1.0.1"
	step("another version")
	o.Platforms = Platforms[:1]
	step("one platform")
}

// TestPruneKeepsTheNewestAndTheLocked: prune removes the builds beyond the newest sharedKeep,
// but not the one just built, nor one another caller holds the lock of.
func TestPruneKeepsTheNewestAndTheLocked(t *testing.T) {
	cache := t.TempDir()
	names := []string{"k0", "k1", "k2", "k3", "k4", "k5"} // k0 the oldest
	for i, n := range names {
		if err := os.MkdirAll(filepath.Join(cache, n, "oci"), 0o755); err != nil {
			t.Fatal(err)
		}
		when := time.Unix(int64(1000+i), 0)
		if err := os.Chtimes(filepath.Join(cache, n), when, when); err != nil {
			t.Fatal(err)
		}
	}
	unlock, err := lockFile(context.Background(), filepath.Join(cache, "k1.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	prune(cache, "k0") // k0 just built: kept though the oldest
	var left []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(cache, n)); err == nil {
			left = append(left, n)
		}
	}
	// k0 (the one built), k1 (locked), and the sharedKeep-1 newest others: k3, k4, k5.
	want := []string{"k0", "k1", "k3", "k4", "k5"}
	if len(left) != len(want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	for i := range want {
		if left[i] != want[i] {
			t.Fatalf("left %v, want %v", left, want)
		}
	}
}
