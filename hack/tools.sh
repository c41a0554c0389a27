#!/usr/bin/env bash
# Builds the tools the test tiers and the local stack run, at pinned versions, into a cache outside
# the repository (CI runs in a fresh clone on the same machine; the cache survives there), and
# installs the Debian packages the tests run (redis-server, docker-compose, gcc for `go test -race`).
#
#   hack/tools.sh ensure [--with LABEL=CMD [--fetch LABEL=CMD]]... [TOOL...]
#                             build what is missing (every tool when none is named)
#   hack/tools.sh bindir ...  the same, then print a folder holding the tools' binaries
#   hack/tools.sh path TOOL   print the cache folder of a tool (never builds)
#   hack/tools.sh list        print the tool names
#
# TOOL: etcd kube-apiserver kube-controller-manager kube-scheduler (kube: all three) kwok helm
# registry argocd controller-gen nats-server golangci-lint govulncheck promtool redis docker-compose gcc.
# govulncheck's folder also holds vulndb/, the Go vulnerability database built offline from the
# golang.org/x/vulndb module at VULNDB_VERSION (see build_govulncheck).
#
# Missing tools build side by side: module downloads and apt installs at once, at most
# AICR_TOOLS_JOBS compiles (2 by default), the longest first. --with runs CMD (bash -c) as one more
# compile job beside them, ahead of the tools' (e.g. the project's own `go build`); --fetch gives
# it a download stage that runs with the tools' downloads. A terminal gets one progress line that
# updates in place (what runs, n of m done, elapsed, an estimate of what is left from the times kept
# in $CACHE/.times, else built-in ones scaled by this machine's speed, learned from the jobs
# recorded there and again as each job of the run finishes); anything else gets plain lines. The builds' own output
# (`go: downloading ...`) goes to one log per job in a folder whose path is printed; a failed job
# prints the end of its log.
#
# Cache: ${AICR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aicr-operator/tools}/<tool>-<version>[-<recipe>]/
# A per-tool flock makes concurrent runs wait for one build instead of starting a second one.
# AICR_TOOLS_RECIPES names a file sourced after the recipes below (tests put fake builds there).
set -euo pipefail

ETCD_VERSION=v3.6.16
KUBE_VERSION=v1.37.2
KWOK_VERSION=v0.8.0
ARGOCD_VERSION=v3.4.2
ARGOCD_GITOPS_ENGINE=v0.0.0-20260512203152-0dc6b1b57dd5
HELM_VERSION=v3.19.5
REGISTRY_VERSION=v3.1.2
CONTROLLER_TOOLS_VERSION=v0.19.0
NATS_SERVER_VERSION=v2.15.2
GOLANGCI_LINT_VERSION=v2.15.0
GOVULNCHECK_VERSION=v1.9.0
# Prometheus's module tags (v0.316.0 is Prometheus v3.16.0); promtool tests the chart's alert rules
PROMETHEUS_VERSION=v0.316.0
# the newest snapshot of the Go vulnerability database's source repository the Go module proxy
# serves: the reports as OSV JSON (data/osv), from which build_govulncheck writes the database
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
vulndb_time() { local t=${VULNDB_VERSION%-*}; echo "${t##*-}"; } # the commit time in the pseudo-version

CACHE=${AICR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aicr-operator/tools}
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
ALL_TOOLS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm registry argocd controller-gen nats-server golangci-lint govulncheck promtool redis docker-compose gcc)
KUBE_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler)
BUILD_SLOTS=${AICR_TOOLS_JOBS:-2}

log() { printf '[tools] %s\n' "$*" >&2; }

# ---- what each tool is --------------------------------------------------------------------------

# group_of TOOL: the cache folder a tool lives in (the kube binaries share one build).
group_of() { case "$1" in kube-*) echo kube ;; *) echo "$1" ;; esac; }

version_of() { # GROUP
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kube) echo "$KUBE_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    argocd) echo "$ARGOCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    registry) echo "$REGISTRY_VERSION" ;;
    controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
    nats-server) echo "$NATS_SERVER_VERSION" ;;
    golangci-lint) echo "$GOLANGCI_LINT_VERSION" ;;
    govulncheck) echo "$GOVULNCHECK_VERSION" ;;
    promtool) echo "$PROMETHEUS_VERSION" ;;
    redis | docker-compose | gcc) echo "debian" ;;
    *) log "unknown tool $1 (known: kube ${ALL_TOOLS[*]})"; exit 2 ;;
  esac
}

# recipe_of GROUP: a suffix naming how the tool is built, so a cache of an earlier recipe rebuilds.
recipe_of() {
  case "$1" in
    argocd) echo "-controller-reposerver" ;; # only the application controller and the repo-server
    govulncheck) echo "-db$(vulndb_time)" ;; # with the database of that vulndb commit
    *) echo "" ;;
  esac
}

dir_of() { echo "$CACHE/$1-$(version_of "$1")$(recipe_of "$1")"; }

# bin_of TOOL: the executable a finished build holds in its bin folder.
bin_of() { case "$1" in redis) echo redis-server ;; *) echo "$1" ;; esac; }

kind_of() { case "$1" in redis | docker-compose | gcc) echo apt ;; *) echo go ;; esac; }

# apt_packages_of GROUP: the Debian packages that give the tool.
apt_packages_of() {
  case "$1" in
    redis) echo redis-server ;;
    docker-compose) echo docker-compose ;;
    gcc) echo gcc libc6-dev ;; # cgo, which go test -race needs
  esac
}

# expand TOOL...: set TOOLS to the tool names, kube spelled out, each once; exit 2 on an unknown one.
expand() {
  local t
  TOOLS=()
  for t in "$@"; do
    if [ "$t" = kube ]; then expand_one "${KUBE_TOOLS[@]}"; else expand_one "$t"; fi
  done
}
expand_one() {
  local t
  for t in "$@"; do
    case " ${ALL_TOOLS[*]} " in *" $t "*) ;; *) log "unknown tool $t (known: kube ${ALL_TOOLS[*]})"; exit 2 ;; esac
    case " ${TOOLS[*]} " in *" $t "*) ;; *) TOOLS+=("$t") ;; esac
  done
}

# built TOOL: the tool's build finished and its executable is a file where it belongs (older caches
# of this script put etcd at bin/etcd/etcd; a rebuild with a warm Go build cache only links).
built() {
  local d b; d=$(dir_of "$(group_of "$1")"); b="$d/bin/$(bin_of "$1")"
  [ -f "$d/.done" ] && [ -f "$b" ] && [ -x "$b" ]
}

# ---- recipes: fetch_<group> downloads (network), build_<group> compiles into $d/bin.tmp ----------

# Each stage runs in its own process, in $d/src, with: $d the tool folder, $comps the tools asked for.

gobuild() { # gobuild OUT LDFLAGS PKG...   (OUT: a file, or a folder ending in /)
  local out=$1 ldflags=$2; shift 2
  CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags="-s -w $ldflags" -o "$out" "$@"
}

# modinfo MODULE@VERSION FIELD: download a module and print one field of `go mod download -json`.
modinfo() { go mod download -json "$1" | sed -n "s/.*\"$2\": \"\(.*\)\",*/\1/p"; }

stub_module() { rm -rf "$d/src"; mkdir -p "$d/src"; cd "$d/src"; printf 'module aicr.local/tools/%s\ngo 1.26.0\n' "$1" >go.mod; }

# fetch_module TOOL MODULE VERSION PKG: a module that requires MODULE at VERSION with its go and
# godebug lines (so the build equals `go install PKG@VERSION`), then download what PKG imports.
fetch_module() {
  local name=$1 mod=$2 ver=$3 pkg=$4 gomod
  stub_module "$name"
  gomod=$(modinfo "$mod@$ver" GoMod)
  modinfo "$mod@$ver" Dir >.moddir
  {
    echo "module aicr.local/tools/$name"
    grep -E '^(go|godebug) ' "$gomod" || echo "go 1.26.0"
    echo "require $mod $ver"
  } >go.mod
  echo "$pkg" >.pkg
  go list -mod=mod -deps "$pkg" >/dev/null
}
build_module() { gobuild "$d/bin.tmp/" "" "$(cat .pkg)"; }

fetch_etcd() {
  stub_module etcd
  printf 'module aicr.local/tools/etcd\ngo 1.26.0\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  cat >main.go <<'EOM'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOM
  go list -mod=mod -deps . >/dev/null
}
build_etcd() { gobuild "$d/bin.tmp/etcd" "" .; }

# kube: only the binaries asked for (the stack and the tests with kwok start all three; the
# control-plane-only environments, bench and chaos, only the apiserver).
fetch_kube() {
  stub_module kube
  local kmod stag="v0.${KUBE_VERSION#v1.}" c
  kmod=$(modinfo "k8s.io/kubernetes@$KUBE_VERSION" GoMod)
  {
    echo "module aicr.local/tools/kube"
    echo "go 1.26.0"
    echo "godebug default=go1.26"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    # k8s.io/kubernetes names its staging modules at v0.0.0 => ./staging; use their releases
    sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$kmod" | while read -r m; do
      echo "replace $m => $m $stag"
    done
  } >go.mod
  for c in $comps; do echo "k8s.io/kubernetes/cmd/$c"; done >.pkgs
  # shellcheck disable=SC2046
  go list -mod=mod -deps $(cat .pkgs) >/dev/null
}
build_kube() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local ld="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  # shellcheck disable=SC2046
  gobuild "$d/bin.tmp/" "$ld" $(cat .pkgs)
}

# argocd: one binary of the two components the stack runs, the application controller and the
# repo-server, chosen by ARGOCD_BINARY_NAME (else the name it is run under) as upstream's
# cmd/main.go does; the other components and the CLI are not linked.
fetch_argocd() {
  stub_module argocd
  local amod
  amod=$(modinfo "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" GoMod)
  modinfo "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" Dir >.moddir
  {
    echo "module aicr.local/tools/argocd"
    echo "go 1.26.0"
    echo "require github.com/argoproj/argo-cd/v3 $ARGOCD_VERSION"
    # argo-cd's own replace block, except its ./gitops-engine line, which points outside the module zip.
    awk '/^replace \($/{inblk=1; print; next} inblk&&/^\)/{inblk=0; print; next} inblk{ if ($0 !~ /gitops-engine/) print; next} /^replace .*=>/{ if ($0 !~ /gitops-engine/) print }' "$amod"
    echo "replace github.com/argoproj/argo-cd/gitops-engine => github.com/argoproj/argo-cd/gitops-engine $ARGOCD_GITOPS_ENGINE"
  } >go.mod
  cat >main.go <<'EOM'
// Command argocd runs the Argo CD components the local stack starts: the application controller
// and the repo-server, picked like upstream's cmd/main.go by ARGOCD_BINARY_NAME or the name the
// binary runs under.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	// Make sure klog uses the configured log level and format.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var command *cobra.Command
	switch name {
	case common.CommandApplicationController:
		command = appcontroller.NewCommand()
	case common.CommandRepoServer:
		command = reposerver.NewCommand()
	default:
		fmt.Fprintf(os.Stderr, "argocd: this build runs only %s and %s (set ARGOCD_BINARY_NAME), not %q\n",
			common.CommandApplicationController, common.CommandRepoServer, name)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
EOM
  go list -mod=mod -deps . >/dev/null
}
build_argocd() {
  gobuild "$d/bin.tmp/argocd" "-X github.com/argoproj/argo-cd/v3/common.version=${ARGOCD_VERSION#v}" .
  # testenv installs the CRDs that ship in the module zip
  mkdir -p "$d/bin.tmp/crds"
  cp "$(cat .moddir)/manifests/crds/"*-crd.yaml "$d/bin.tmp/crds/"
}

fetch_kwok() { fetch_module kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok; }
build_kwok() {
  build_module
  local m s; m="$(cat .moddir)/kustomize/stage"
  mkdir -p "$d/bin.tmp/stages"
  for s in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    cp "$m/$s.yaml" "$d/bin.tmp/stages/$(basename "$s").yaml"
  done
}
fetch_helm() { fetch_module helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm; }
build_helm() { build_module; }
fetch_registry() { fetch_module registry github.com/distribution/distribution/v3 "$REGISTRY_VERSION" github.com/distribution/distribution/v3/cmd/registry; }
build_registry() { build_module; }
fetch_controller-gen() { fetch_module controller-gen sigs.k8s.io/controller-tools "$CONTROLLER_TOOLS_VERSION" sigs.k8s.io/controller-tools/cmd/controller-gen; }
build_controller-gen() { build_module; }
# nats-server runs as its own process where a test kills and restarts it (e2e/chaos).
fetch_nats-server() { fetch_module nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION" github.com/nats-io/nats-server/v2; }
build_nats-server() { build_module; }
fetch_golangci-lint() { fetch_module golangci-lint github.com/golangci/golangci-lint/v2 "$GOLANGCI_LINT_VERSION" github.com/golangci/golangci-lint/v2/cmd/golangci-lint; }
build_golangci-lint() { build_module; }
fetch_promtool() { fetch_module promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool; }
build_promtool() { build_module; }

# govulncheck, and beside it vulndb/, a database it reads with -db file://.../vulndb: there is no
# network but the Go module proxy, so vuln.go.dev is out of reach. The proxy serves the database's
# source repository, golang.org/x/vulndb, whose data/osv holds every report as the OSV JSON the
# database serves; the program below writes them in the database's layout (index/db.json,
# index/modules.json, index/vulns.json, ID/<id>.json; golang.org/x/vulndb/internal/database does
# the same, but from a git clone). The entries are copied as they are. Left out: each module's
# "fixed" hint (optional: without it govulncheck reads the entry), and the entries' modified times
# (the repository sets them from git history, which a module lacks); db.json's is the snapshot's
# commit time, so govulncheck reports how old the database is. A newer database: a newer
# VULNDB_VERSION.
fetch_govulncheck() {
  fetch_module govulncheck golang.org/x/vuln "$GOVULNCHECK_VERSION" golang.org/x/vuln/cmd/govulncheck
  modinfo "golang.org/x/vulndb@$VULNDB_VERSION" Dir >.vulndbdir
}
build_govulncheck() {
  build_module
  mkdir -p gendb
  printf 'module aicr.local/tools/gendb\ngo 1.26.0\n' >gendb/go.mod
  cat >gendb/main.go <<'EOM'
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

type entry struct {
	ID       string   `json:"id"`
	Modified string   `json:"modified"`
	Aliases  []string `json:"aliases"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

type moduleVuln struct {
	ID       string `json:"id"`
	Modified string `json:"modified"`
}

type module struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type vuln struct {
	ID       string   `json:"id"`
	Modified string   `json:"modified"`
	Aliases  []string `json:"aliases,omitempty"`
}

// gendb OSV-DIR COMMIT-TIME OUT-DIR
func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "gendb:", err)
		os.Exit(1)
	}
}

func run(osvDir, stamp, out string) error {
	when, err := time.Parse("20060102150405", stamp)
	if err != nil {
		return fmt.Errorf("commit time %q: %w", stamp, err)
	}
	files, err := filepath.Glob(filepath.Join(osvDir, "GO-*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no reports in %s", osvDir)
	}
	for _, d := range []string{"index", "ID"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return err
		}
	}
	mods := map[string]*module{}
	var vulns []vuln
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" {
			return fmt.Errorf("%s: no id", f)
		}
		vulns = append(vulns, vuln{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		for _, a := range e.Affected {
			m := mods[a.Package.Name]
			if m == nil {
				m = &module{Path: a.Package.Name, Vulns: []moduleVuln{}}
				mods[a.Package.Name] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), b, 0o644); err != nil {
			return err
		}
	}
	modules := make([]*module, 0, len(mods))
	for _, m := range mods {
		modules = append(modules, m)
	}
	sort.Slice(modules, func(i, j int) bool { return modules[i].Path < modules[j].Path })
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	for name, v := range map[string]any{
		"db.json":      map[string]string{"modified": when.UTC().Format(time.RFC3339)},
		"modules.json": modules,
		"vulns.json":   vulns,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "index", name), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("gendb: %d reports, %d modules\n", len(vulns), len(modules))
	return nil
}
EOM
  (cd gendb && go run . "$(cat ../.vulndbdir)/data/osv" "$(vulndb_time)" "$d/bin.tmp/vulndb")
}

# apt_tool GROUP: link the tool from the system, installing its Debian packages first when it is missing.
apt_tool() {
  local group=$1 b; b=$(bin_of "$group")
  mkdir -p "$d/bin.tmp"
  if ! command -v "$b" >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    apt_install $(apt_packages_of "$group")
  fi
  if ! command -v "$b" >/dev/null 2>&1; then
    echo "$b is still not on PATH after installing $(apt_packages_of "$group")"; return 1
  fi
  ln -sf "$(command -v "$b")" "$d/bin.tmp/$b"
}

apt_install() { # PKG...
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$* missing, and this is not a Debian system: install $* with the system's package manager, then run again"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "the Debian package(s) $* are missing, and installing them needs root: run"
      echo "  sudo apt-get install -y $*"
      echo "(or run this as root), then run again"
      return 1
    fi
  fi
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends -o DPkg::Lock::Timeout=600)
  echo "installing the Debian package(s) $*"
  "${apt[@]}" install "$@" && return 0
  # the package lists may be stale or absent (a fresh image): update them once per run, then retry
  if mkdir "$RUN_DIR/apt-updated" 2>/dev/null; then
    echo "apt-get install failed; running apt-get update once and trying again"
    "${apt[@]}" update
  fi
  "${apt[@]}" install "$@"
}

# the standard library as every build here compiles it (the project's make build too)
build_std() { CGO_ENABLED=0 go build -trimpath std; }

if [ -n "${AICR_TOOLS_RECIPES:-}" ]; then
  # shellcheck source=/dev/null
  . "$AICR_TOOLS_RECIPES"
fi

# ---- estimates: seconds a job takes, from $CACHE/.times (earlier builds here) or built in -------

# A job's download and compile, measured on 2 cores with empty Go caches, two compiles at a time
# (docs/testing.md, run 3); the kube split follows the packages each binary adds.
builtin_estimate() { # GROUP COMPS
  case "$1" in
    etcd) echo 40 ;;
    kube) local s=0 c
      for c in $2; do case "$c" in kube-apiserver) s=$((s + 490)) ;; kube-controller-manager) s=$((s + 80)) ;; *) s=$((s + 30)) ;; esac; done
      echo $s ;;
    argocd) echo 325 ;;
    helm) echo 100 ;;
    kwok) echo 105 ;;
    registry) echo 105 ;;
    controller-gen) echo 40 ;;
    nats-server) echo 40 ;;
    golangci-lint) echo 150 ;;
    govulncheck) echo 30 ;;
    promtool) echo 300 ;;
    std) echo 60 ;;
    binaries) echo 230 ;;
    redis | docker-compose | gcc) echo 30 ;;
    *) echo 120 ;;
  esac
}

# recorded_estimate KEY GROUP: the last recorded time of this exact job, else of the same tool at
# any version; nothing when none is recorded.
recorded_estimate() {
  local key=$1 s=""
  if [ -f "$CACHE/.times" ]; then
    s=$(awk -v k="$key" '$1 == k { s = $2 } END { print s }' "$CACHE/.times")
    [ -n "$s" ] || s=$(awk -v g="$2" 'index($1, g "-") == 1 || $1 == "with:" g { s = $2 } END { print s }' "$CACHE/.times")
  fi
  echo "$s"
}

# SPEED_SAMPLES: how many of the latest recorded jobs speed_pct weighs.
SPEED_SAMPLES=8

# speed_pct: this machine's speed, as the percentage of the built-in figures its compiles take:
# the recorded times of the latest SPEED_SAMPLES jobs in $CACHE/.times (this run's as they finish,
# then earlier runs') over the built-in figures of the same jobs, between 25 and 2000; 100 when
# nothing is recorded. apt installs say nothing of the compiler's speed and are left out, and so
# are --with commands other than the binaries and the standard library (no built-in figure).
speed_pct() {
  local key s group comps sum_s=0 sum_b=0 n=0 pct
  if [ -f "$CACHE/.times" ]; then
    while read -r key s; do
      [[ "$s" =~ ^[0-9]+$ ]] || continue
      case "$key" in
        with:stdlib) group=std comps="" ;;
        with:binaries) group=binaries comps="" ;;
        with:*) continue ;;
        *:*) comps=${key#*:} comps=${comps//,/ } group=$(group_of "${comps%% *}") ;;
        *) continue ;;
      esac
      [ "$(kind_of "$group")" != apt ] || continue
      sum_s=$((sum_s + s)) sum_b=$((sum_b + $(builtin_estimate "$group" "$comps"))) n=$((n + 1))
      [ "$n" -lt "$SPEED_SAMPLES" ] || break
    done < <(tac "$CACHE/.times")
  fi
  if [ "$sum_b" -eq 0 ]; then echo 100; return; fi
  pct=$((sum_s * 100 / sum_b))
  [ "$pct" -ge 25 ] || pct=25
  [ "$pct" -le 2000 ] || pct=2000
  echo "$pct"
}
SPEED=100

# job_estimate I: the seconds job I is expected to take: its recorded time, else the built-in
# figure at this machine's speed (SPEED, learned again as each job finishes).
job_estimate() {
  local i=$1
  if [ -n "${J_REC[i]}" ]; then echo "${J_REC[i]}"; else echo $((J_BASE[i] * SPEED / 100)); fi
}

record_time() { # KEY SECONDS
  mkdir -p "$CACHE"
  echo "$1 $2" >>"$CACHE/.times"
  if [ "$(wc -l <"$CACHE/.times")" -gt 400 ]; then
    tail -n 200 "$CACHE/.times" >"$CACHE/.times.$$" && mv "$CACHE/.times.$$" "$CACHE/.times"
  fi
}

fmt_dur() { # SECONDS -> 45s, 3m05s, 1h02m
  local s=$1
  if [ "$s" -lt 60 ]; then printf '%ds' "$s"
  elif [ "$s" -lt 3600 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60))
  else printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60)); fi
}

fmt_left() { # SECONDS -> ~40s, ~9m
  local s=$1
  if [ "$s" -lt 60 ]; then printf '~%ds' $(((s + 9) / 10 * 10)); else printf '~%dm' $(((s + 59) / 60)); fi
}

# ---- the scheduler ------------------------------------------------------------------------------

# Jobs, one per tool folder to build and one per --with command: parallel arrays indexed by job.
J_LABEL=() J_GROUP=() J_COMPS=() J_KIND=() J_CMD=() J_FETCH=() J_REC=() J_BASE=() J_KEY=() J_FIRST=()
J_STATE=() J_PID=() J_FD=() J_LOG=() J_STAGE_START=() J_ACTIVE=()

add_job() { # LABEL GROUP COMPS KIND CMD KEY [first]   (first: compiles before every other job)
  local i=${#J_LABEL[@]}
  J_LABEL[i]=$1 J_GROUP[i]=$2 J_COMPS[i]=$3 J_KIND[i]=$4 J_CMD[i]=$5 J_KEY[i]=$6 J_FIRST[i]=${7:-} J_FETCH[i]=""
  J_REC[i]=$(recorded_estimate "$6" "${2:-$1}") J_BASE[i]=$(builtin_estimate "${2:-$1}" "$3")
  J_STATE[i]=new J_PID[i]="" J_FD[i]="" J_LOG[i]="" J_STAGE_START[i]="" J_ACTIVE[i]=0
}

TTY=0
if [ -t 2 ] && [ "${TERM:-dumb}" != dumb ]; then TTY=1; fi
DRAWN=0

cols() {
  local c
  c=$(stty size 0<&2 2>/dev/null | cut -d' ' -f2) || c=""
  [ -n "$c" ] && [ "$c" -gt 20 ] 2>/dev/null || c=${COLUMNS:-80}
  echo "$c"
}

# event LINE: a line that stays (above the progress line on a terminal).
event() {
  if [ "$TTY" = 1 ] && [ "$DRAWN" = 1 ]; then printf '\r\033[K' >&2; DRAWN=0; fi
  printf '[tools] %s\n' "$*" >&2
}

# prio I: the order compiles start in: --with commands first (what the caller runs next), then
# the longest job.
prio() { if [ "${J_KIND[$1]}" = cmd ]; then echo $((1000000 + $(job_estimate "$1"))); else job_estimate "$1"; fi; }

# active I NOW: the seconds job I has run so far (its stages, not its wait for a compile slot).
active() {
  local i=$1 a=${J_ACTIVE[$1]}
  case "${J_STATE[i]}" in fetch | build | apt) a=$((a + $2 - J_STAGE_START[i])) ;; esac
  echo "$a"
}

# time_left NOW: the estimated seconds until every job is done: the jobs' remaining times laid out
# greedily, longest first, on BUILD_SLOTS slots (a job past its estimate gets a tenth of its age).
time_left() {
  local now=$1 i r age rem=() loads=() k best
  for i in "${!J_LABEL[@]}"; do
    case "${J_STATE[i]}" in done) continue ;; esac
    age=$(active "$i" "$now"); r=$(($(job_estimate "$i") - age))
    [ "$r" -ge $((age / 10 + 5)) ] || r=$((age / 10 + 5))
    rem+=("$r")
  done
  [ ${#rem[@]} -gt 0 ] || { echo 0; return; }
  for ((k = 0; k < BUILD_SLOTS; k++)); do loads[k]=0; done
  for r in $(printf '%s\n' "${rem[@]}" | sort -rn); do
    best=0
    for ((k = 1; k < BUILD_SLOTS; k++)); do [ "${loads[k]}" -lt "${loads[best]}" ] && best=$k; done
    loads[best]=$((loads[best] + r))
  done
  printf '%s\n' "${loads[@]}" | sort -rn | head -1
}

# status NOW: what runs, n of m, elapsed, the estimate left.
status() {
  local now=$1 i ndone=0 build="" fetch="" apt="" wait="" s
  for i in "${!J_LABEL[@]}"; do
    case "${J_STATE[i]}" in
      done) ndone=$((ndone + 1)) ;;
      build) build+="${build:+, }${J_LABEL[i]} $(fmt_dur $((now - J_STAGE_START[i])))" ;;
      fetch) fetch+="${fetch:+, }${J_LABEL[i]}" ;;
      apt) apt+="${apt:+, }${J_LABEL[i]}" ;;
      locked) wait+="${wait:+, }${J_LABEL[i]}" ;;
    esac
  done
  s="[tools $ndone/${#J_LABEL[@]}]"
  [ -z "$build" ] || s+=" building $build;"
  [ -z "$fetch" ] || s+=" downloading $fetch;"
  [ -z "$apt" ] || s+=" installing $apt;"
  [ -z "$wait" ] || s+=" waiting for another run: $wait;"
  s+=" $(fmt_dur $((now - RUN_START))) elapsed, $(fmt_left "$(time_left "$now")") left"
  echo "$s"
}

draw() {
  local now=$SECONDS line w
  if [ "$TTY" = 1 ]; then
    line=$(status "$now"); w=$(cols)
    printf '\r\033[K%s' "${line:0:w-1}" >&2; DRAWN=1
  elif [ $((now - LAST_BEAT)) -ge "${AICR_TOOLS_HEARTBEAT:-60}" ]; then
    LAST_BEAT=$now
    printf '%s\n' "$(status "$now")" >&2
  fi
}

# spawn I STAGE: run one stage of job I as its own process (its own session, so a failure or
# Ctrl-C can stop it with its children), output to the job's log. It keeps its own job's lock open,
# so no other run starts that build while it still writes; the other jobs' locks it closes.
spawn() {
  local i=$1 stage=$2 j close=""
  for j in "${!J_FD[@]}"; do
    [ "$j" = "$i" ] || [ -z "${J_FD[j]}" ] || close+="${J_FD[j]} "
  done
  J_STATE[i]=$stage J_STAGE_START[i]=$SECONDS
  echo "== $stage started at $(date +%T)" >>"${J_LOG[i]}"
  local launcher=()
  if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi
  local command=${J_CMD[i]}
  [ "$stage" != fetch ] || command=${J_FETCH[i]}
  AICR_TOOLS_CLOSE_FDS=$close RUN_DIR=$RUN_DIR "${launcher[@]}" "$SELF" _stage "$stage" "${J_GROUP[i]}" "${J_COMPS[i]}" "$command" \
    >>"${J_LOG[i]}" 2>&1 </dev/null &
  J_PID[i]=$!
}

stop_all() {
  local i
  for i in "${!J_PID[@]}"; do
    [ -n "${J_PID[i]}" ] || continue
    kill -TERM -- "-${J_PID[i]}" 2>/dev/null || kill -TERM "${J_PID[i]}" 2>/dev/null || true
  done
  for i in "${!J_PID[@]}"; do
    [ -n "${J_PID[i]}" ] && wait "${J_PID[i]}" 2>/dev/null || true
  done
}

release() { # I
  local i=$1
  if [ -n "${J_FD[i]}" ]; then eval "exec ${J_FD[i]}>&-"; J_FD[i]=""; fi
}

# finish I: move a tool's new binaries into its bin folder (one rename each, so a reader sees a
# whole binary or none) and mark the build done.
finish() {
  local i=$1 d c b f
  d=$(dir_of "${J_GROUP[i]}")
  for c in ${J_COMPS[i]}; do
    b="$d/bin.tmp/$(bin_of "$c")"
    if ! [ -f "$b" ] || ! [ -x "$b" ]; then echo "$d/bin.tmp lacks $(bin_of "$c")" >>"${J_LOG[i]}"; return 1; fi
  done
  mkdir -p "$d/bin"
  for f in "$d/bin.tmp/"*; do
    rm -rf "$d/bin/${f##*/}"; mv "$f" "$d/bin/${f##*/}"
  done
  rm -rf "$d/bin.tmp" "$d/src"
  echo "$(date -u +%FT%TZ) ${J_ACTIVE[i]}s ${J_COMPS[i]}" >"$d/.done"
}

fail() { # I RC
  local i=$1
  event "FAILED: ${J_LABEL[i]} (exit $2) after $(fmt_dur "$(active "$i" $SECONDS)"); the end of ${J_LOG[i]}:"
  tail -n 40 "${J_LOG[i]}" | sed 's/^/    /' >&2
  stop_all
  exit 1
}

run_jobs() {
  local n=${#J_LABEL[@]} i rc d fd running ndone best c first st
  [ "$n" -gt 0 ] || return 0
  mkdir -p "$CACHE/logs"
  RUN_DIR="$CACHE/logs/$(date +%Y%m%d-%H%M%S)-$$"
  mkdir -p "$RUN_DIR"
  # keep the logs of the last ten runs
  ls -1dt "$CACHE/logs/"*/ 2>/dev/null | tail -n +11 | while read -r old; do rm -rf "$old"; done
  RUN_START=$SECONDS LAST_BEAT=$SECONDS SPEED=$(speed_pct)
  trap 'stop_all; event "interrupted"; exit 130' INT TERM HUP

  local names=""
  for i in "${!J_LABEL[@]}"; do
    names+="${names:+, }${J_LABEL[i]}"
    J_LOG[i]="$RUN_DIR/${J_LABEL[i]// /-}.log"
    : >"${J_LOG[i]}"
  done
  event "building $names ($n job$([ "$n" = 1 ] || echo s), $BUILD_SLOTS compiles at a time; about $(fmt_left "$(time_left $SECONDS)" | tr -d '~'))"
  event "build output (go: downloading ...) goes to $RUN_DIR/"

  while :; do
    # take the locks we can; a tool another run is building waits for that run
    for i in "${!J_LABEL[@]}"; do
      case "${J_STATE[i]}" in new | locked) ;; *) continue ;; esac
      if [ "${J_KIND[i]}" = cmd ]; then
        if [ -n "${J_FETCH[i]}" ]; then J_STATE[i]=ready-fetch; else J_STATE[i]=ready-build; fi
        continue
      fi
      d=$(dir_of "${J_GROUP[i]}")
      if [ -z "${J_FD[i]}" ]; then mkdir -p "$CACHE"; exec {fd}>"$d.lock"; J_FD[i]=$fd; fi
      if flock -n "${J_FD[i]}"; then
        local missing=""
        for c in ${J_COMPS[i]}; do built "$c" || missing+="$c "; done
        if [ -z "$missing" ]; then
          release "$i"; J_STATE[i]=done; event "${J_LABEL[i]}: built meanwhile by another run"; continue
        fi
        J_COMPS[i]=${missing% }
        rm -rf "$d/bin.tmp" "$d/src"; mkdir -p "$d"
        if [ -f "$d/.done" ]; then echo "rebuilding: $d/bin lacks ${J_COMPS[i]}" >>"${J_LOG[i]}"; fi
        if [ "${J_KIND[i]}" = apt ]; then J_STATE[i]=ready-apt; else J_STATE[i]=ready-fetch; fi
      elif [ "${J_STATE[i]}" = new ]; then
        J_STATE[i]=locked; event "${J_LABEL[i]}: another run is building it; waiting for that run"
      fi
    done

    # reap finished stages
    for i in "${!J_LABEL[@]}"; do
      case "${J_STATE[i]}" in fetch | build | apt) ;; *) continue ;; esac
      if kill -0 "${J_PID[i]}" 2>/dev/null; then continue; fi
      rc=0; wait "${J_PID[i]}" || rc=$?
      J_PID[i]=""
      echo "== ${J_STATE[i]} ended at $(date +%T) after $((SECONDS - J_STAGE_START[i]))s (exit $rc)" >>"${J_LOG[i]}"
      J_ACTIVE[i]=$((J_ACTIVE[i] + SECONDS - J_STAGE_START[i]))
      st=${J_STATE[i]} J_STATE[i]=reaped
      [ "$rc" = 0 ] || fail "$i" "$rc"
      case "$st" in
        fetch) J_STATE[i]=ready-build ;;
        build | apt)
          if [ "${J_KIND[i]}" != cmd ]; then finish "$i" || fail "$i" 1; release "$i"; fi
          J_STATE[i]=done
          record_time "${J_KEY[i]}" "${J_ACTIVE[i]}"
          SPEED=$(speed_pct)
          ndone=0; for c in "${!J_LABEL[@]}"; do [ "${J_STATE[c]}" != done ] || ndone=$((ndone + 1)); done
          event "$ndone/$n ${J_LABEL[i]} done in $(fmt_dur "${J_ACTIVE[i]}"); $(fmt_dur $((SECONDS - RUN_START))) elapsed$([ "$ndone" = "$n" ] || echo ", $(fmt_left "$(time_left $SECONDS)") left")"
          ;;
      esac
    done

    # start what may start: every download and apt install at once (apt-get waits for the dpkg
    # lock), compiles on BUILD_SLOTS, the longest first
    running=0
    for i in "${!J_LABEL[@]}"; do
      case "${J_STATE[i]}" in
        ready-fetch) spawn "$i" fetch ;;
        ready-apt) spawn "$i" apt ;;
        build) running=$((running + 1)) ;;
      esac
    done
    first=""
    for i in "${!J_LABEL[@]}"; do
      [ -z "${J_FIRST[i]}" ] || [ "${J_STATE[i]}" = done ] || first=$i
    done
    while [ "$running" -lt "$BUILD_SLOTS" ]; do
      best=""
      for i in "${!J_LABEL[@]}"; do
        [ "${J_STATE[i]}" = ready-build ] || continue
        [ -z "$first" ] || [ "$i" = "$first" ] || continue
        if [ -z "$best" ] || [ "$(prio "$i")" -gt "$(prio "$best")" ]; then best=$i; fi
      done
      [ -n "$best" ] || break
      spawn "$best" build; running=$((running + 1))
    done

    ndone=0; for i in "${!J_LABEL[@]}"; do [ "${J_STATE[i]}" != done ] || ndone=$((ndone + 1)); done
    if [ "$ndone" = "$n" ]; then break; fi
    draw
    sleep 0.5
  done
  if [ "$TTY" = 1 ] && [ "$DRAWN" = 1 ]; then printf '\r\033[K' >&2; fi
  event "all $n done in $(fmt_dur $((SECONDS - RUN_START)))"
  trap - INT TERM HUP
}

# plan TOOL...: one job per tool folder with something missing, in the order asked.
plan() {
  local t g groups=() comps key
  for t in "$@"; do
    built "$t" && continue
    g=$(group_of "$t")
    case " ${groups[*]} " in *" $g "*) ;; *) groups+=("$g") ;; esac
  done
  for g in "${groups[@]}"; do
    comps=""
    for t in "$@"; do [ "$(group_of "$t")" != "$g" ] || built "$t" || comps+="$t "; done
    comps=${comps% }
    key="$(basename "$(dir_of "$g")"):${comps// /,}"
    local label=$g
    if [ "$g" = kube ] && [ "$comps" != "${KUBE_TOOLS[*]}" ]; then label=${comps// /+}; fi
    add_job "$label" "$g" "$comps" "$(kind_of "$g")" "" "$key"
  done
}

# stage STAGE GROUP COMPS CMD: one stage of one job, in its own process (see spawn).
stage() {
  local fd rc=0
  for fd in ${AICR_TOOLS_CLOSE_FDS:-}; do eval "exec $fd>&-"; done
  # in the background, so that errexit holds in the recipes
  stage_work "$@" &
  wait $! || rc=$?
  # the CPU time the stage's processes took, a figure that depends less on what else the machine
  # runs than the elapsed time does (times runs here, not in a subshell, which would count none)
  echo "== cpu (user system) of this shell, then of its processes:"
  times
  return "$rc"
}

stage_work() {
  local st=$1 group=$2
  comps=$3
  case "$group" in
    "") bash -c "$4"; return ;;
    std) build_std; return ;;
  esac
  d=$(dir_of "$group")
  mkdir -p "$d/src"; cd "$d/src"
  export GOWORK=off
  case "$st" in
    fetch) "fetch_$group" ;;
    build) mkdir -p "$d/bin.tmp"; "build_$group" ;;
    apt) apt_tool "$group" ;;
  esac
}

cmd=${1:-ensure}; shift || true
withs=() fetches=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with) withs+=("$2"); shift 2 ;;
    --with=*) withs+=("${1#--with=}"); shift ;;
    --fetch) fetches+=("$2"); shift 2 ;;
    --fetch=*) fetches+=("${1#--fetch=}"); shift ;;
    *) break ;;
  esac
done

case "$cmd" in
  _stage) stage "$@"; exit ;;
  list) printf '%s\n' kube "${ALL_TOOLS[@]}"; exit ;;
  path) dir_of "$(group_of "${1:?usage: hack/tools.sh path TOOL}")"; exit ;;
  ensure | bindir) ;;
  *) log "usage: hack/tools.sh ensure|bindir [--with LABEL=CMD [--fetch LABEL=CMD]]... [TOOL...] | path TOOL | list"; exit 2 ;;
esac

[ $# -gt 0 ] || set -- "${ALL_TOOLS[@]}"
expand "$@"
plan "${TOOLS[@]}"
if [ ${#J_LABEL[@]} -eq 0 ]; then
  # nothing to build: the --with commands run as they are, their output on stderr
  for w in "${withs[@]}"; do bash -c "${w#*=}" >&2; done
else
  # the standard library once, with the tools' flags, while the downloads run: builds that start
  # side by side would each compile it
  if printf '%s\n' "${J_KIND[@]}" | grep -qx go; then
    add_job stdlib std "" cmd "" "with:stdlib" first
  fi
  for w in "${withs[@]}"; do
    label=${w%%=*}
    add_job "$label" "" "" cmd "${w#*=}" "with:${label// /-}"
    for f in "${fetches[@]}"; do [ "${f%%=*}" != "$label" ] || J_FETCH[${#J_LABEL[@]} - 1]=${f#*=}; done
  done
  run_jobs
fi

if [ "$cmd" = bindir ]; then
  # one folder of links, named after the versions it holds, so concurrent runs agree
  key=$(for t in "${TOOLS[@]}"; do echo "$t-$(version_of "$(group_of "$t")")$(recipe_of "$(group_of "$t")")"; done | sha256sum | cut -c1-12)
  out="$CACHE/bin-$key"; mkdir -p "$out"
  for t in "${TOOLS[@]}"; do
    for f in "$(dir_of "$(group_of "$t")")/bin/"*; do ln -sfn "$f" "$out/$(basename "$f")"; done
  done
  echo "$out"
fi
