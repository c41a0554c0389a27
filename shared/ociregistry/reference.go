package ociregistry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Repository is a repository of a registry: Host (name[:port]) and Name (the path under it).
type Repository struct {
	Host string
	Name string
}

func (r Repository) String() string { return r.Host + "/" + r.Name }

// Reference is a repository with a tag, a digest, or both (the digest wins when pulling).
type Reference struct {
	Repository
	Tag    string
	Digest string
}

func (r Reference) String() string {
	s := r.Repository.String()
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// The grammar of the distribution spec (names, tags) and the digests the operator accepts.
var (
	hostRe   = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$`)
	nameRe   = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagRe    = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	digestRe = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// ParseRepository reads "host[:port]/name" (an "oci://" prefix is allowed and dropped).
func ParseRepository(s string) (Repository, error) {
	rest := strings.TrimPrefix(s, "oci://")
	host, name, ok := strings.Cut(rest, "/")
	if !ok || host == "" || name == "" {
		return Repository{}, fmt.Errorf("%q is not a repository: host[:port]/name is required, such as registry.example.com/aicr/bundles", s)
	}
	if !hostRe.MatchString(host) {
		return Repository{}, fmt.Errorf("%q is not a repository: %q is not a registry host (name or address, optional :port)", s, host)
	}
	if len(name) > 255 || !nameRe.MatchString(name) {
		return Repository{}, fmt.Errorf("%q is not a repository: %q is not a repository name (lowercase letters, digits and . _ - separators, in /-separated parts)", s, name)
	}
	return Repository{Host: host, Name: name}, nil
}

// ParseReference reads "host[:port]/name[:tag][@digest]".
func ParseReference(s string) (Reference, error) {
	var ref Reference
	rest := s
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		ref.Digest = rest[at+1:]
		rest = rest[:at]
		if err := ValidateDigest(ref.Digest); err != nil {
			return Reference{}, fmt.Errorf("%q: %w", s, err)
		}
	}
	// a tag is after the last ':' that follows the last '/', so a host's port is not one
	if colon := strings.LastIndex(rest, ":"); colon > strings.LastIndex(rest, "/") {
		ref.Tag = rest[colon+1:]
		rest = rest[:colon]
		if !tagRe.MatchString(ref.Tag) {
			return Reference{}, fmt.Errorf("%q: %q is not a tag: 1 to 128 of letters, digits, _ . - (not starting with . or -) are accepted", s, ref.Tag)
		}
	}
	repo, err := ParseRepository(rest)
	if err != nil {
		return Reference{}, err
	}
	ref.Repository = repo
	return ref, nil
}

// ValidateDigest accepts "sha256:" and 64 lowercase hex characters, the only algorithm read.
func ValidateDigest(d string) error {
	if !digestRe.MatchString(d) {
		return fmt.Errorf("%q is not a digest: sha256: followed by 64 lowercase hex characters is required", d)
	}
	return nil
}

// Digest is the sha256 digest of b in the OCI form.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
