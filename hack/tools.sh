#!/usr/bin/env bash
# Builds the tools the test tiers and the local stack need, at pinned versions, into a cache outside
# the repository (CI runs in a fresh clone on the same machine; the cache survives there).
#
#   hack/tools.sh ensure [TOOL...]   build what is missing (all tools when none are named)
#   hack/tools.sh bindir [TOOL...]   ensure, then print a folder holding every tool's binaries
#   hack/tools.sh path TOOL          print the folder of one tool (without building)
#
# Cache: ${AICR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aicr-operator/tools}/<tool>-<version>/
# Everything is built from the Go module proxy; redis comes from Debian (apt) when it is missing.
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

CACHE=${AICR_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aicr-operator/tools}
ALL_TOOLS=(etcd kube kwok helm registry controller-gen argocd redis nats-server)

log() { printf '[tools] %s\n' "$*" >&2; }

version_of() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kube) echo "$KUBE_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    argocd) echo "$ARGOCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    registry) echo "$REGISTRY_VERSION" ;;
    controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
    redis) echo "debian" ;;
    nats-server) echo "$NATS_SERVER_VERSION" ;;
    *) log "unknown tool $1 (known: ${ALL_TOOLS[*]})"; exit 2 ;;
  esac
}

dir_of() { echo "$CACHE/$1-$(version_of "$1")"; }

# bins_of TOOL: the executables a finished build must hold in its bin folder.
bins_of() {
  case "$1" in
    kube) echo kube-apiserver kube-controller-manager kube-scheduler ;;
    redis) echo redis-server ;;
    *) echo "$1" ;;
  esac
}

# has_bins DIR TOOL: DIR holds every executable of TOOL as a file (not a folder).
has_bins() {
  local b
  for b in $(bins_of "$2"); do [ -f "$1/$b" ] && [ -x "$1/$b" ] || return 1; done
}

# built TOOL: finished, and the binaries are where they belong (older caches of this script put
# etcd at bin/etcd/etcd; those are rebuilt, a link-only build with a warm Go build cache).
built() { local d; d=$(dir_of "$1"); [ -f "$d/.done" ] && has_bins "$d/bin" "$1"; }

# wrapper_build DIR MODULE_LINES... : a throwaway module in DIR/src whose go.mod the caller fills.
gobuild() { # gobuild OUT LDFLAGS PKG...   (OUT: a file, or a folder ending in /)
  local out=$1 ldflags=$2; shift 2
  # a file OUT must not exist as a folder: go build -o <folder> names the binary after the package
  case "$out" in */) mkdir -p "$out" ;; *) mkdir -p "$(dirname "$out")" ;; esac
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w $ldflags" -o "$out" "$@"
}

build_etcd() {
  local d=$1 src=$1/src; mkdir -p "$src"
  cat >"$src/go.mod" <<EOM
module aicr.local/tools/etcd
go 1.26.0
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOM
  cat >"$src/main.go" <<'EOM'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOM
  (cd "$src" && go mod tidy >/dev/null && gobuild "$d/bin.tmp/etcd" "" .)
}

build_kube() {
  local d=$1 src=$1/src; mkdir -p "$src"
  local kmod
  kmod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local stag="v0.${KUBE_VERSION#v1.}"
  {
    echo "module aicr.local/tools/kube"
    echo "go 1.26.0"
    echo "godebug default=go1.26"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$kmod" | while read -r m; do
      echo "replace $m => $m $stag"
    done
  } >"$src/go.mod"
  cat >"$src/tools.go" <<'EOM'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOM
  local ld="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  (cd "$src" && go mod tidy -e >/dev/null 2>&1 || true
   cd "$src" && gobuild "$d/bin.tmp/" "$ld" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
}

build_argocd() {
  local d=$1 src=$1/src; mkdir -p "$src"
  local amod
  amod=$(go mod download -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module aicr.local/tools/argocd"
    echo "go 1.26.0"
    echo "require github.com/argoproj/argo-cd/v3 $ARGOCD_VERSION"
    # argo-cd's own replace block, except its ./gitops-engine line, which points outside the module zip.
    awk '/^replace \($/{inblk=1; print; next} inblk&&/^\)/{inblk=0; print; next} inblk{ if ($0 !~ /gitops-engine/) print; next} /^replace .*=>/{ if ($0 !~ /gitops-engine/) print }' "$amod"
    echo "replace github.com/argoproj/argo-cd/gitops-engine => github.com/argoproj/argo-cd/gitops-engine $ARGOCD_GITOPS_ENGINE"
  } >"$src/go.mod"
  cat >"$src/tools.go" <<'EOM'
//go:build tools

package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
EOM
  (cd "$src" && go mod tidy -e >/dev/null 2>&1 || true
   cd "$src" && gobuild "$d/bin.tmp/argocd" "-X github.com/argoproj/argo-cd/v3/common.version=${ARGOCD_VERSION#v}" github.com/argoproj/argo-cd/v3/cmd)
  # the CRDs ship in the module zip
  mkdir -p "$d/bin.tmp/crds"
  cp "$(dirname "$amod")/../argo-cd/v3@$ARGOCD_VERSION/manifests/crds/"*-crd.yaml "$d/bin.tmp/crds/" 2>/dev/null || \
    cp "$(go env GOMODCACHE)/github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION/manifests/crds/"*-crd.yaml "$d/bin.tmp/crds/"
}

build_goinstall() { # build_goinstall DIR PKG@VERSION
  local d=$1 pkg=$2
  GOBIN="$d/bin.tmp" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "$pkg"
}

build_kwok() {
  build_goinstall "$1" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  local m; m="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  mkdir -p "$1/bin.tmp/stages"
  for s in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    cp "$m/$s.yaml" "$1/bin.tmp/stages/$(basename "$s").yaml"
  done
}
build_helm() { build_goinstall "$1" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"; }
build_registry() { build_goinstall "$1" "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"; }
build_controller-gen() { build_goinstall "$1" "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"; }
# nats-server runs as its own process where a test kills and restarts it (e2e/chaos).
build_nats-server() { build_goinstall "$1" "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"; }
build_redis() {
  mkdir -p "$1/bin.tmp"
  if ! command -v redis-server >/dev/null 2>&1; then
    log "installing redis-server from Debian"
    if [ "$(id -u)" = 0 ]; then
      (apt-get install -y -qq redis-server >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq redis-server >/dev/null; })
    else
      log "redis-server missing and not root: install the Debian package redis-server"; return 1
    fi
  fi
  ln -sf "$(command -v redis-server)" "$1/bin.tmp/redis-server"
}

ensure() {
  local t=$1 d; d=$(dir_of "$t")
  built "$t" && return 0
  mkdir -p "$CACHE"
  exec 9>"$d.lock"
  flock 9
  if built "$t"; then exec 9>&-; return 0; fi
  [ -f "$d/.done" ] && log "rebuilding $t: $d/bin lacks $(bins_of "$t")"
  log "building $t $(version_of "$t") into $d"
  local start=$SECONDS
  rm -rf "$d/bin.tmp" "$d/.done"; mkdir -p "$d"
  if ! "build_$t" "$d"; then log "FAILED to build $t"; exec 9>&-; return 1; fi
  if ! has_bins "$d/bin.tmp" "$t"; then log "FAILED to build $t: $d/bin.tmp lacks $(bins_of "$t")"; exec 9>&-; return 1; fi
  rm -rf "$d/bin"; mv "$d/bin.tmp" "$d/bin"; rm -rf "$d/src"
  echo "$(date -u +%FT%TZ) $((SECONDS - start))s" >"$d/.done"
  log "built $t $(version_of "$t") in $((SECONDS - start))s"
  exec 9>&-
}

cmd=${1:-ensure}; shift || true
tools=("$@"); [ ${#tools[@]} -gt 0 ] || tools=("${ALL_TOOLS[@]}")
case "$cmd" in
  ensure) for t in "${tools[@]}"; do ensure "$t"; done ;;
  path) dir_of "${tools[0]}" ;;
  bindir)
    for t in "${tools[@]}"; do ensure "$t"; done
    # one folder of links, named after the versions it holds, so concurrent runs agree
    key=$(for t in "${tools[@]}"; do echo "$t-$(version_of "$t")"; done | sha256sum | cut -c1-12)
    out="$CACHE/bin-$key"; mkdir -p "$out"
    for t in "${tools[@]}"; do
      for f in "$(dir_of "$t")/bin/"*; do ln -sfn "$f" "$out/$(basename "$f")"; done
    done
    echo "$out" ;;
  *) log "usage: hack/tools.sh ensure|bindir|path [TOOL...]"; exit 2 ;;
esac
