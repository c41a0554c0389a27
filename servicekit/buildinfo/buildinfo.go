// Package buildinfo is the release every binary of the operator was built as: the version and
// git revision the build stamps in at link time (make build, make images and make release pass
//
//	-ldflags "-X github.com/aicr-run/aicr-operator/servicekit/buildinfo.version=v0.1.0
//	          -X github.com/aicr-run/aicr-operator/servicekit/buildinfo.revision=<commit>"
//
// ), else what the Go toolchain recorded (the vcs.revision of a build inside the repository) and
// the version "dev". The services log it when they start and export it as aicr_build_info; the
// planner writes it into the ClusterRuntime's status, where kubectl aicr version reads it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Path is this package's import path, for -ldflags -X.
const Path = "github.com/aicr-run/aicr-operator/servicekit/buildinfo"

// DevVersion is the version of a build the release tooling did not stamp.
const DevVersion = "dev"

// version and revision are set by the linker (-X); it can only set package string variables.
var (
	version  = ""
	revision = ""
)

// Info is what a binary was built from.
type Info struct {
	// Version is the release (a v* tag, or git describe's answer), DevVersion when not stamped.
	Version string `json:"version"`
	// Revision is the full git commit, "" when unknown.
	Revision string `json:"revision,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
}

// Get returns the binary's build information.
func Get() Info {
	return resolve(version, revision, readVCSRevision)
}

// resolve fills what the linker did not set: the revision from the toolchain's record, the
// version with DevVersion.
func resolve(v, rev string, vcs func() string) Info {
	if rev == "" {
		rev = vcs()
	}
	if v == "" {
		v = DevVersion
	}
	return Info{Version: v, Revision: rev, GoVersion: runtime.Version()}
}

func readVCSRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// ShortRevision is the first 12 characters of the revision, for people.
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}
