#!/usr/bin/env bash
# Fails when generated files are stale, when a module is untidy, when go work sync would change
# anything, or when two k8s.io minor versions appear in the workspace build list.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
snapshot() { git status --porcelain --untracked-files=all -- "$@" ; git diff -- "$@"; }

echo "verify: generated code and CRDs"
before=$(snapshot shared/api shared/argoapp deploy/charts 2>/dev/null || true)
make -s generate >/dev/null
after=$(snapshot shared/api shared/argoapp deploy/charts 2>/dev/null || true)
if [ "$before" != "$after" ]; then
  echo "  stale generated files; run 'make generate' and commit:"; git status --short shared/api shared/argoapp deploy/charts; fail=1
fi

echo "verify: go.mod/go.sum tidy and go work sync"
mods=$(sed -n 's#^[[:space:]]*\./\([a-z0-9-]*\)$#\1#p' go.work)
before=$(snapshot go.work go.work.sum $(for m in $mods; do echo "$m/go.mod $m/go.sum"; done))
for m in $mods; do (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy); done
go work sync
after=$(snapshot go.work go.work.sum $(for m in $mods; do echo "$m/go.mod $m/go.sum"; done))
if [ "$before" != "$after" ]; then
  echo "  modules are not tidy; run 'make tidy' and commit:"; git status --short -- '*go.mod' '*go.sum' go.work; fail=1
fi

echo "verify: one k8s.io minor version"
# (go list -m all cannot load the whole graph: k8s.io/kubernetes names its staging modules at
# v0.0.0; the workspace only builds against the modules its packages import.)
minors=$(go list -m k8s.io/api k8s.io/apimachinery k8s.io/client-go k8s.io/apiextensions-apiserver | awk '{split($2, v, "."); print v[1]"."v[2]}' | sort -u)
if [ "$(echo "$minors" | wc -l)" -ne 1 ]; then
  echo "  more than one k8s.io minor version in the workspace: $(echo $minors)"; fail=1
fi
echo "verify: gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "  not gofmt-ed (run gofmt -w):"; echo "$unformatted" | sed 's/^/    /'; fail=1
fi
[ "$fail" = 0 ] && echo "verify: ok"
exit $fail
