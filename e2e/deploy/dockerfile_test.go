package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
)

// TestImageBuildCopiesEveryLocalModule proves that deploy/Dockerfile can build each binary alone:
// a module builds with GOWORK=off through its replaces of sibling folders (../shared and the
// others), and Go reads the go.mod of every one of them, so the image's build context must copy
// each folder a binary's go.mod replaces to, in both the dependency stage (go.mod and go.sum) and
// the source stage. A module split that adds a folder and forgets the Dockerfile fails here.
func TestImageBuildCopiesEveryLocalModule(t *testing.T) {
	root := charttest.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	copyLine := regexp.MustCompile(`(?m)^COPY (.+) (\S+)$`)
	var modFiles, sources []string // folders whose go.mod is copied; folders copied whole
	for _, m := range copyLine.FindAllStringSubmatch(string(raw), -1) {
		if strings.HasPrefix(m[1], "--from=") {
			continue
		}
		for _, src := range strings.Fields(m[1]) {
			switch {
			case strings.HasSuffix(src, "/go.mod"):
				modFiles = append(modFiles, strings.TrimSuffix(src, "/go.mod"))
			case strings.HasSuffix(src, "/"):
				sources = append(sources, strings.TrimSuffix(src, "/"))
			}
		}
	}
	for _, binary := range []string{"planner", "applier", "readiness", "credrefresher", "admission", "setup", "cli"} {
		data, err := os.ReadFile(filepath.Join(root, binary, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(binary+"/go.mod", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Replace {
			if !modfile.IsDirectoryPath(r.New.Path) {
				continue
			}
			dir := filepath.ToSlash(filepath.Clean(filepath.Join(binary, r.New.Path)))
			if !slices.Contains(modFiles, dir) {
				t.Errorf("%s/go.mod replaces %s => %s, but the Dockerfile's dependency stage does not copy %s/go.mod", binary, r.Old.Path, r.New.Path, dir)
			}
			if !slices.Contains(sources, dir) {
				t.Errorf("%s/go.mod replaces %s => %s, but the Dockerfile does not copy the folder %s/", binary, r.Old.Path, r.New.Path, dir)
			}
		}
	}
	// the binary's own folder, through the build argument
	if !slices.Contains(modFiles, "${BINARY}") || !slices.Contains(sources, "${BINARY}") {
		t.Errorf("the Dockerfile does not copy the binary's own module (${BINARY}/go.mod and ${BINARY}/)")
	}
}
