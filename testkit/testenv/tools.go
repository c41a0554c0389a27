package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Environment variables testenv reads.
const (
	// EnvToolsBin names a folder holding the tools' binaries (hack/tools.sh bindir prints one).
	EnvToolsBin = "AICR_TOOLS_BIN"
	// EnvRequireTools set to "1" turns "tools missing" from a skip into a failure.
	EnvRequireTools = "AICR_REQUIRE_TOOLS"
	// EnvKeep set to "1" keeps Dir after Stop; "running" also leaves the processes running.
	EnvKeep = "AICR_KEEP_TESTENV"
)

// argoCDModule is the Argo CD release whose CRDs are installed (the one hack/tools.sh builds).
const argoCDModule = "github.com/argoproj/argo-cd/v3@v3.4.2"

// toolsScriptTimeout bounds one call of hack/tools.sh path/bindir (neither builds here).
const toolsScriptTimeout = time.Minute

// ErrToolsMissing is wrapped by the error Start returns when a needed binary is not available.
// RunMain, StartT and Current turn it into a skip, or a failure with AICR_REQUIRE_TOOLS=1.
var ErrToolsMissing = errors.New("tools missing")

// MissingToolsError lists what is missing and how to get it.
type MissingToolsError struct {
	// Tools are hack/tools.sh tool names (kube, argocd, ...) that are not built.
	Tools []string
	// Binaries are the missing file names, when a tools folder was given.
	Binaries []string
	// Dir is the folder searched, if any.
	Dir string
	// Reason says why the tools could not be looked up at all, if that was the problem.
	Reason string
}

func (e *MissingToolsError) Error() string {
	var b strings.Builder
	b.WriteString("testenv: tools missing: ")
	switch {
	case e.Reason != "":
		b.WriteString(e.Reason)
	case len(e.Binaries) > 0:
		fmt.Fprintf(&b, "%s not in the tools folder %s", strings.Join(e.Binaries, ", "), e.Dir)
	default:
		fmt.Fprintf(&b, "%s not built in the tools cache", strings.Join(e.Tools, ", "))
	}
	fmt.Fprintf(&b, " (build them with `hack/tools.sh ensure %s` or `make tools`, slow once; "+
		"`make test-integration` / `make e2e` build and use them; or point %s at a folder holding them; "+
		"%s=1 fails instead of skipping)",
		strings.Join(e.Tools, " "), EnvToolsBin, EnvRequireTools)
	return b.String()
}

func (e *MissingToolsError) Unwrap() error { return ErrToolsMissing }

// toolBinaries maps hack/tools.sh tool names to the binaries (or folders) testenv uses from them.
// The three kube binaries are separate tools (one build folder): an environment without
// workloads needs only the apiserver.
var toolBinaries = map[string][]string{
	"etcd":                    {"etcd"},
	"kube-apiserver":          {"kube-apiserver"},
	"kube-controller-manager": {"kube-controller-manager"},
	"kube-scheduler":          {"kube-scheduler"},
	"kwok":                    {"kwok", "stages"},
	"argocd":                  {"argocd"},
	"redis":                   {"redis-server"},
	"helm":                    {"helm"},
	"registry":                {"registry"},
}

// neededTools returns the hack/tools.sh tools and the binaries opts needs, in a stable order.
func neededTools(opts Options) (tools, binaries []string) {
	tools = []string{"etcd", "kube-apiserver"}
	binaries = []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		tools = append(tools, "kube-controller-manager")
		binaries = append(binaries, "kube-controller-manager")
	}
	if opts.Scheduler {
		tools = append(tools, "kube-scheduler")
		binaries = append(binaries, "kube-scheduler")
	}
	if opts.Kwok {
		tools = append(tools, "kwok")
		binaries = append(binaries, "kwok", "stages")
	}
	if opts.ArgoCD {
		// the repo-server runs helm to render Helm charts
		tools = append(tools, "argocd", "redis", "helm")
		binaries = append(binaries, "argocd", "redis-server", "helm")
	}
	if opts.Registry {
		tools = append(tools, "registry", "helm")
		binaries = append(binaries, "registry", "helm")
	}
	slices.Sort(tools)
	slices.Sort(binaries)
	return slices.Compact(tools), slices.Compact(binaries)
}

// resolveTools returns the folder holding every binary opts needs: opts.ToolsDir, else
// $AICR_TOOLS_BIN, else hack/tools.sh's link folder when all needed tools are already built.
func resolveTools(opts Options) (string, error) {
	tools, binaries := neededTools(opts)
	dir := opts.ToolsDir
	if dir == "" {
		dir = os.Getenv(EnvToolsBin)
	}
	if dir != "" {
		var missing []string
		for _, b := range binaries {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return "", &MissingToolsError{Tools: toolsOf(missing), Binaries: missing, Dir: dir}
		}
		return filepath.Abs(dir)
	}

	root, err := repoRoot()
	if err != nil {
		return "", &MissingToolsError{Tools: tools, Reason: fmt.Sprintf("%s is not set and %v", EnvToolsBin, err)}
	}
	script := filepath.Join(root, "hack", "tools.sh")
	var missing []string
	for _, t := range tools {
		out, err := runScript(script, "path", t)
		if err != nil {
			return "", err
		}
		if !toolBuilt(out, toolBinaries[t]) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return "", &MissingToolsError{Tools: missing}
	}
	// every tool is built, so bindir only links them
	return runScript(script, append([]string{"bindir"}, tools...)...)
}

// toolBuilt reports whether a tool's cache folder holds a finished build with every file
// (the same test hack/tools.sh makes before it would build).
func toolBuilt(dir string, files []string) bool {
	if _, err := os.Stat(filepath.Join(dir, ".done")); err != nil {
		return false
	}
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, "bin", f))
		if err != nil || (!st.IsDir() && st.Mode().Perm()&0o111 == 0) || (st.IsDir() && f != "stages") {
			return false
		}
	}
	return true
}

// toolsOf maps binary names back to tool names.
func toolsOf(binaries []string) []string {
	var out []string
	for tool, bins := range toolBinaries {
		for _, b := range bins {
			if slices.Contains(binaries, b) && !slices.Contains(out, tool) {
				out = append(out, tool)
			}
		}
	}
	slices.Sort(out)
	return out
}

func runScript(script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), toolsScriptTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("run hack/tools.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// repoRoot walks up from the working directory (a test runs in its package folder) to the folder
// holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "tools.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work with hack/tools.sh above the working directory")
		}
		dir = parent
	}
}

// argoCRDFiles are the Argo CD CRDs installed by default, in install order.
var argoCRDFiles = []string{"application-crd.yaml", "appproject-crd.yaml", applicationSetCRDFile}

const applicationSetCRDFile = "applicationset-crd.yaml"

// argoCRDDir finds Argo CD's manifests/crds: the copy in the argocd tool's bin folder, else the
// argo-cd module in the module cache (downloaded through the Go module proxy if it is not there;
// every module of this repository requires it already).
func argoCRDDir(toolsDir string) (string, error) {
	has := func(dir string) bool {
		for _, f := range argoCRDFiles {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return false
			}
		}
		return true
	}
	if toolsDir != "" && has(filepath.Join(toolsDir, "crds")) {
		return filepath.Join(toolsDir, "crds"), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), toolsScriptTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output(); err == nil {
		mod, ver, _ := strings.Cut(argoCDModule, "@")
		dir := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(mod)+"@"+ver, "manifests", "crds")
		if has(dir) {
			return dir, nil
		}
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", argoCDModule)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("download %s for its CRDs: %w", argoCDModule, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("decode go mod download output: %w", err)
	}
	dir := filepath.Join(info.Dir, "manifests", "crds")
	if !has(dir) {
		return "", fmt.Errorf("find argo cd crds: not in %s", dir)
	}
	return dir, nil
}
