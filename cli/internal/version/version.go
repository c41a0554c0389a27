// Package version is the plugin's own version: what the build stamps into servicekit/buildinfo
// at link time (make build, make plugin, make release), else "dev" and the revision the Go
// toolchain recorded in the binary.
package version

import (
	"runtime"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
)

// Info describes the plugin binary.
type Info struct {
	// Version is the release (a git tag) or "dev" for a build the release tooling did not stamp.
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, when known.
	Commit string `json:"commit,omitempty"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns the plugin's version.
func Get() Info {
	b := buildinfo.Get()
	return Info{Version: b.Version, Commit: b.Revision, GoVersion: b.GoVersion, Platform: runtime.GOOS + "/" + runtime.GOARCH}
}
