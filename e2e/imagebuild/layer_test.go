package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A layer's bytes depend only on its files and the time given: the order files come in does
// not matter, parents are added, entries are sorted, and nothing of the machine gets in.
func TestLayerTarIsCanonical(t *testing.T) {
	mtime := time.Unix(1_700_000_000, 0)
	files := []file{
		{Path: "usr/local/bin/planner", Mode: 0o755, Data: []byte("binary")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")},
		{Path: "home/nonroot", Dir: true, Mode: 0o700, UID: UID, GID: GID},
		{Path: "tmp", Dir: true, Mode: 0o1777},
	}
	a, err := layerTar(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	reversed := []file{files[3], files[2], files[1], files[0]}
	b, err := layerTar(reversed, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the same files in another order give another tar")
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(mtime) || !h.AccessTime.IsZero() || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %s, atime %s, owner names %q/%q; want only the given time", h.Name, h.ModTime, h.AccessTime, h.Uname, h.Gname)
		}
		switch h.Name {
		case "home/nonroot/":
			if h.Uid != UID || h.Gid != GID || h.Mode != 0o700 {
				t.Errorf("home: %d:%d %o", h.Uid, h.Gid, h.Mode)
			}
		case "tmp/":
			if h.Mode != 0o1777 {
				t.Errorf("tmp: mode %o, want 1777", h.Mode)
			}
		}
	}
	want := []string{"etc/", "etc/passwd", "home/", "home/nonroot/", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/planner"}
	if len(names) != len(want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("entry %d = %q, want %q (all: %q)", i, names[i], want[i], names)
		}
	}
	l1, err := newLayer(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := newLayer(reversed, mtime)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l1.Digest()
	d2, _ := l2.Digest()
	if d1 != d2 {
		t.Errorf("layer digests %s and %s for the same files", d1, d2)
	}
	l3, err := newLayer(files, mtime.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := l3.Digest(); d3 == d1 {
		t.Errorf("another time gives the same digest: the time is not in the layer")
	}
}

func TestResolveUser(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range baseFiles(&CACertificates{}) {
		if f.Path == "etc/passwd" || f.Path == "etc/group" {
			if err := os.WriteFile(filepath.Join(dir, f.Path), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		user     string
		uid, gid int
		err      bool
	}{
		{ImageUser, UID, GID, false},
		{"nonroot", UID, GID, false},
		{"nonroot:root", UID, 0, false},
		{"65532", UID, GID, false},
		{"", 0, 0, false},
		{"nobody", 0, 0, true},
		{"nonroot:wheel", 0, 0, true},
	} {
		uid, gid, err := ResolveUser(dir, tc.user)
		if (err != nil) != tc.err || (!tc.err && (uid != tc.uid || gid != tc.gid)) {
			t.Errorf("ResolveUser(%q) = %d, %d, %v; want %d, %d, error %v", tc.user, uid, gid, err, tc.uid, tc.gid, tc.err)
		}
	}
}
