package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The image's user: what the chart's securityContext runs as (runAsUser 65532) and what
// distroless calls nonroot.
const (
	UID       = 65532
	GID       = 65532
	UserName  = "nonroot"
	ImageUser = "65532:65532"
	// CABundle is where Go (and OpenSSL) on Linux look first for the system's CA certificates.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// BinDir is where each image's binary lives.
	BinDir = "/usr/local/bin"
)

// CACertificates is what the image takes from Debian's ca-certificates package.
type CACertificates struct {
	// Version is the package's version (recorded in the SBOM and the base layer's history).
	Version string
	// Bundle is every certificate of the package, concatenated in path order as
	// update-ca-certificates writes /etc/ssl/certs/ca-certificates.crt.
	Bundle []byte
	// Copyright is the package's copyright file.
	Copyright []byte
	// Count is how many certificates Bundle holds.
	Count int
}

// FindCADeb returns the ca-certificates .deb in dir, fetching it with apt-get download when the
// folder has none. A .deb already there is used as it is: it pins the certificates (delete it to
// take Debian's current one).
func FindCADeb(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, "ca-certificates_*.deb"))
		sort.Strings(m)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	if p := find(); p != "" {
		return p, nil
	}
	cmd := exec.CommandContext(ctx, "apt-get", "download", "ca-certificates")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download ca-certificates in %s (or pass the .deb with --ca-deb): %w: %s", dir, err, bytes.TrimSpace(out))
	}
	if p := find(); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("apt-get download ca-certificates left no ca-certificates_*.deb in %s", dir)
}

// ReadCADeb takes the certificates, copyright and version out of a ca-certificates .deb (with
// dpkg-deb, which reads every compression Debian uses).
func ReadCADeb(ctx context.Context, deb string) (*CACertificates, error) {
	version, err := exec.CommandContext(ctx, "dpkg-deb", "--field", deb, "Version").Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-deb --field %s Version: %w", deb, err)
	}
	fsys, err := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
	}
	ca := &CACertificates{Version: strings.TrimSpace(string(version))}
	certs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(fsys))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", deb, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case h.Typeflag == tar.TypeReg && strings.HasPrefix(name, "usr/share/ca-certificates/") && strings.HasSuffix(name, ".crt"):
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			certs[name] = b
		case h.Typeflag == tar.TypeReg && name == "usr/share/doc/ca-certificates/copyright":
			if ca.Copyright, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
	names := make([]string, 0, len(certs))
	for n := range certs {
		names = append(names, n)
	}
	sort.Strings(names)
	var bundle bytes.Buffer
	for _, n := range names {
		b := certs[n]
		bundle.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			bundle.WriteByte('\n')
		}
	}
	ca.Bundle = bundle.Bytes()
	if ca.Count, err = CountCertificates(ca.Bundle); err != nil {
		return nil, fmt.Errorf("%s: %w", deb, err)
	}
	if ca.Count == 0 {
		return nil, fmt.Errorf("%s holds no certificate under usr/share/ca-certificates", deb)
	}
	return ca, nil
}

// CountCertificates counts the X.509 certificates of a PEM bundle, failing on one that does not
// parse.
func CountCertificates(bundle []byte) (int, error) {
	n := 0
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return n, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return n, fmt.Errorf("certificate %d of the CA bundle: %w", n+1, err)
		}
		n++
	}
}

// baseFiles is the static base every image shares: the CA bundle, passwd and group with root
// and the non-root user (no login shell: the image has none), nsswitch.conf for Go's resolver,
// the user's home and a /tmp.
func baseFiles(ca *CACertificates) []file {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UID, GID, UserName, UserName)
	group := "root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", UserName, GID)
	return []file{
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: strings.TrimPrefix(CABundle, "/"), Mode: 0o644, Data: ca.Bundle},
		{Path: "usr/share/doc/ca-certificates/copyright", Mode: 0o644, Data: ca.Copyright},
		{Path: "home/" + UserName, Dir: true, Mode: 0o700, UID: UID, GID: GID},
		{Path: "root", Dir: true, Mode: 0o700},
		{Path: "tmp", Dir: true, Mode: 0o1777},
	}
}
