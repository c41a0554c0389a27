#!/usr/bin/env bash
# Builds kubectl-aicr for linux and darwin on amd64 and arm64 (make plugin):
#
#   dist/kubectl-aicr_<VERSION>_<os>_<arch>/kubectl-aicr   the binary
#   dist/kubectl-aicr_<VERSION>_<os>_<arch>.tar.gz         the archive krew installs
#   dist/sha256sums.txt                                    the archives' sums
#   dist/krew/aicr.yaml                                    deploy/krew/aicr.yaml, filled in
#
# VERSION (default: the latest v* tag, else v<chart appVersion>-dev.<commit>) and the commit are
# stamped into the binary (kubectl aicr version). URL_BASE is where the archives will be
# downloaded from (default: the GitHub release of VERSION).
set -euo pipefail
cd "$(dirname "$0")/.."

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -z "${VERSION:-}" ]; then
  VERSION=$(git describe --tags --match 'v*' 2>/dev/null || true)
  if [ -z "$VERSION" ]; then
    app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' deploy/charts/aicr-operator/Chart.yaml)
    VERSION="v${app}-dev.${commit}"
  fi
fi
URL_BASE=${URL_BASE:-https://github.com/aicr-run/aicr-operator/releases/download/$VERSION}
DIST=${DIST:-dist}
pkg=github.com/aicr-run/aicr-operator/servicekit/buildinfo
ldflags="-s -w -X $pkg.version=$VERSION -X $pkg.revision=$(git rev-parse HEAD 2>/dev/null)"

rm -rf "$DIST"
mkdir -p "$DIST/krew"
manifest=$(cat deploy/krew/aicr.yaml)
manifest=${manifest//@VERSION@/$VERSION}
manifest=${manifest//@URL_BASE@/$URL_BASE}
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os=${target%/*} arch=${target#*/}
  name="kubectl-aicr_${VERSION}_${os}_${arch}"
  echo "plugin: $name" >&2
  mkdir -p "$DIST/$name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$DIST/$name/kubectl-aicr" ./cli/cmd/kubectl-aicr
  cp docs/cli.md "$DIST/$name/README.md"
  tar -C "$DIST/$name" -czf "$DIST/$name.tar.gz" kubectl-aicr README.md
  sum=$(sha256sum "$DIST/$name.tar.gz" | cut -d' ' -f1)
  echo "$sum  $name.tar.gz" >> "$DIST/sha256sums.txt"
  manifest=${manifest//@SHA256_${os}_${arch}@/$sum}
done
# The template's header comment is for the template only.
printf '%s\n' "$manifest" | sed '/^# /d' > "$DIST/krew/aicr.yaml"
if grep -q '@[A-Z_0-9a-z]*@' "$DIST/krew/aicr.yaml"; then
  echo "plugin: placeholders left in $DIST/krew/aicr.yaml" >&2
  exit 1
fi
echo "plugin: $VERSION in $DIST/ (krew manifest $DIST/krew/aicr.yaml)" >&2
