package buildinfo

import (
	"runtime"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func() string { return "0123456789abcdef0123" }
	for _, tc := range []struct {
		name, version, revision string
		want                    Info
	}{
		{"stamped", "v0.2.0", "feedface", Info{Version: "v0.2.0", Revision: "feedface"}},
		{"not stamped: dev and the toolchain's revision", "", "", Info{Version: DevVersion, Revision: "0123456789abcdef0123"}},
		{"version only", "v0.2.0", "", Info{Version: "v0.2.0", Revision: "0123456789abcdef0123"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.GoVersion = runtime.Version()
			if got := resolve(tc.version, tc.revision, vcs); got != tc.want {
				t.Errorf("resolve(%q, %q) = %+v, want %+v", tc.version, tc.revision, got, tc.want)
			}
		})
	}
}

func TestShortRevision(t *testing.T) {
	if got := (Info{Revision: "0123456789abcdef0123"}).ShortRevision(); got != "0123456789ab" {
		t.Errorf("ShortRevision = %q", got)
	}
	if got := (Info{Revision: "abc"}).ShortRevision(); got != "abc" {
		t.Errorf("ShortRevision of a short revision = %q", got)
	}
}
