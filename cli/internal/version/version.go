// Package version is the plugin's own version: what `make plugin` stamps in at link time, else
// what the Go toolchain recorded in the binary.
package version

import (
	"cmp"
	"runtime"
	"runtime/debug"
)

// version and commit are set by make plugin with -ldflags "-X .../version.version=v0.1.0 -X
// .../version.commit=<sha>"; the linker can only set package variables, hence these two.
var (
	version = ""
	commit  = ""
)

// Info describes the plugin binary.
type Info struct {
	// Version is the release (a git tag) or "(devel)" for a build outside make plugin.
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
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Commit == "" {
				info.Commit = s.Value
			}
		}
	}
	info.Version = cmp.Or(info.Version, "(devel)")
	return info
}
