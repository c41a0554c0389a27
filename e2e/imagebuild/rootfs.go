package imagebuild

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Unpack writes the root filesystem of img into dir (created), layer by layer, with the owners
// and modes of the layers (as root, which the images' run test is). Whiteouts remove what a
// lower layer wrote; an entry that would land outside dir is an error.
func Unpack(img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = unpackLayer(tar.NewReader(rc), dir)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

func unpackLayer(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.Clean("/" + h.Name)
		target := filepath.Join(dir, rel)
		if base := filepath.Base(rel); strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(target), strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		mode := os.FileMode(h.Mode).Perm() //nolint:gosec // G115: Perm keeps the low nine bits
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("%s: tar entry type %c is not supported", h.Name, h.Typeflag)
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
	}
}

// ResolveUser is the uid and gid an image's config User runs as, looked up in the root
// filesystem's /etc/passwd and /etc/group as a container runtime does: "uid", "uid:gid", "name"
// or "name:group". An empty User is root.
func ResolveUser(rootfs, user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	passwd, err := readColonFile(filepath.Join(rootfs, "etc", "passwd"))
	if err != nil {
		return 0, 0, err
	}
	entry, found := lookup(passwd, u)
	switch {
	case found:
		uid, _ = strconv.Atoi(entry[2])
		gid, _ = strconv.Atoi(entry[3])
	default:
		if uid, err = strconv.Atoi(u); err != nil {
			return 0, 0, fmt.Errorf("user %q of %q is neither a number nor in the image's /etc/passwd", u, user)
		}
	}
	if hasGroup {
		groups, err := readColonFile(filepath.Join(rootfs, "etc", "group"))
		if err != nil {
			return 0, 0, err
		}
		if e, ok := lookup(groups, g); ok {
			gid, _ = strconv.Atoi(e[2])
		} else if gid, err = strconv.Atoi(g); err != nil {
			return 0, 0, fmt.Errorf("group %q of %q is neither a number nor in the image's /etc/group", g, user)
		}
	}
	return uid, gid, nil
}

// PasswdEntry is the /etc/passwd line of uid in the root filesystem, nil when there is none.
func PasswdEntry(rootfs string, uid int) ([]string, error) {
	passwd, err := readColonFile(filepath.Join(rootfs, "etc", "passwd"))
	if err != nil {
		return nil, err
	}
	for _, e := range passwd {
		if len(e) >= 7 && e[2] == strconv.Itoa(uid) {
			return e, nil
		}
	}
	return nil, nil
}

// lookup finds the entry named (field 0) or numbered (field 2) key.
func lookup(entries [][]string, key string) ([]string, bool) {
	for _, e := range entries {
		if len(e) >= 4 && (e[0] == key || e[2] == key) {
			return e, true
		}
	}
	return nil, false
}

func readColonFile(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, ":"))
		}
	}
	return out, sc.Err()
}
